// broker/saved_slots — conversations that survive an eviction (docs/conversations.md). Before the broker
// stops an engine whose kind keeps slot files (llama-server) to make room, for idleness or on request, the
// engine writes each slot holding at least `slot_save.min_tokens` to a file in its launch's folder,
// <state_dir>/slots/<key>/; this store keeps beside each file what the slot held as text (<name>.json), and
// the broker restores the best match into a slot of the restarted engine for a request whose prompt
// continues it (SavedSlots::match), so that the engine does not read the conversation again.
//
// The key is the launch: its argv (every setting, the model's path, the devices) names the folder; the
// folder's launch.txt holds that argv (checked against a hash collision) and the identity (path, size,
// mtime) of every file the argv names — the engine binary and the model file among them. A changed setting
// is another folder; a changed model file or engine build empties the folder when the launch is prepared,
// before the engine can save or restore anything: a file is only ever restored into an engine launched
// exactly as the one that wrote it.
//
// Disk: every saved file counts against `slot_save.max_disk`; the oldest go first. A newer save of the
// same conversation (its text extends an older one's) replaces the older file at once. Nothing is saved
// while the folder's file system has less than 10 % or 1 GiB free. The store's file work (sidecars,
// removals, the launch's folder and its identities, the free-space check) runs on its own worker thread,
// never on the loop; only the scan at start, before the loop serves, runs on the caller's.
#pragma once

#include <chrono>
#include <cstdint>
#include <filesystem>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <string_view>
#include <vector>

#include <boost/asio/awaitable.hpp>
#include <boost/asio/thread_pool.hpp>
#include <nlohmann/json.hpp>

#include "config/config.hpp"
#include "engines/kind.hpp"

namespace loch::broker {

// The folder name of a launch: its argv hashed, 16 hex digits. Pure.
std::string slot_folder(const std::vector<std::string>& argv);
// The identity (path|size|mtime) of every file the argv names, one per line. Stats files: not on the loop.
std::string launch_identity(const std::vector<std::string>& argv);

struct SavedEntry {
    std::string key;     // slot_folder() of the launch
    std::string file;    // in <root>/<key>/
    std::string prompt;  // what the slot held, as text
    std::uint64_t tokens = 0;
    std::uint64_t bytes = 0;
    std::int64_t saved_at_ms = 0;  // Unix milliseconds
};

// The entry whose text the prompt continues the furthest: the common prefix must cover at least half of
// the entry's text and 256 bytes (less is re-read faster than a file is restored). Entries named in
// `skip` are left out (already restored in this run). Pure.
std::optional<SavedEntry> best_match(const std::vector<SavedEntry>& entries, std::string_view prompt,
                                     const std::set<std::string>& skip);
// The entries to drop so that the rest fit in `max_bytes`, oldest first; and of one key, every entry whose
// text a newer entry's text extends (a later save of the same conversation). Pure.
std::vector<SavedEntry> over_limit(const std::vector<SavedEntry>& entries, std::uint64_t max_bytes);

class SavedSlots {
  public:
    // Scans `root` (<state_dir>/slots) once: the entries of earlier runs, files without a sidecar removed.
    SavedSlots(std::filesystem::path root, config::SlotSaveConfig cfg);
    ~SavedSlots();
    void configure(const config::SlotSaveConfig& cfg) { cfg_ = cfg; }
    const config::SlotSaveConfig& config() const { return cfg_; }

    // Where a launch's engine saves its slots (<root>/<slot_folder>); nullopt when saving is off. Pure:
    // the folder is made by prepare().
    std::optional<std::filesystem::path> folder(const std::vector<std::string>& argv) const;
    // Makes the launch's folder ready on the worker: created, its launch.txt written; the files of another
    // identity (a replaced model file, a rebuilt engine) deleted and forgotten. False when the folder
    // cannot be made or belongs to another argv (a hash collision): then the launch saves nothing.
    boost::asio::awaitable<bool> prepare(std::vector<std::string> argv);
    // Whether saving now is worth trying (on, and the file system has room; checked on the worker).
    boost::asio::awaitable<bool> may_save(std::string key);
    bool has(const std::string& key) const { return files_of_.contains(key); }
    // Whether a saved slot of `key` not in `skip` contains `probe` (the kind's prompt_probe).
    bool may_match(const std::string& key, std::string_view probe, const std::set<std::string>& skip) const;
    std::optional<SavedEntry> match(const std::string& key, std::string_view prompt,
                                    const std::set<std::string>& skip) const;
    // Records what an engine saved (sidecars written), then drops what is over the limit: the entries
    // dropped.
    boost::asio::awaitable<std::vector<SavedEntry>> add(std::string key,
                                                        std::vector<engines::SavedSlot> saved);
    // {"files", "bytes", "max_disk", "min_tokens", "enabled", "folder"}.
    nlohmann::json status() const;

  private:
    bool saving() const;  // on, with a disk limit and a folder
    void forget(const std::vector<SavedEntry>& gone);
    void remember(std::vector<SavedEntry> fresh);

    std::filesystem::path root_;
    config::SlotSaveConfig cfg_;
    std::vector<SavedEntry> entries_;
    std::map<std::string, std::size_t> files_of_;  // key → entries: has() without a scan per request
    boost::asio::thread_pool work_{1};
};

}  // namespace loch::broker
