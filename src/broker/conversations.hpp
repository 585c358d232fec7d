// broker/conversations — conversations that survive an eviction (docs/conversations.md), and the owner of
// everything about them: the saved-slot store (broker/saved_slots.hpp), each model's current run as far as
// its slots go (the launch folder its engine saves to, the saved files already restored into it) and the
// restore counters /metrics shows.
//
// The broker calls it around an engine's life: at a launch (with_slot_files, then prepare while the engine
// loads), and before a stop that keeps conversations (may_save, save). The proxy calls it for a request on
// a lease (has_saved → may_restore → restore, then confirm with the first answer's cache figures).
// Everything runs on the broker's thread; the store's file work runs on its own worker.
#pragma once

#include <chrono>
#include <cstdint>
#include <filesystem>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include <boost/asio/any_io_executor.hpp>
#include <boost/asio/awaitable.hpp>
#include <nlohmann/json.hpp>

#include "broker/events.hpp"
#include "broker/lease.hpp"
#include "broker/saved_slots.hpp"
#include "config/config.hpp"
#include "core/clock.hpp"
#include "engines/kind.hpp"
#include "engines/run.hpp"
#include "engines/spec.hpp"

namespace loch::broker {

class Conversations {
  public:
    // `root`: <state_dir>/slots (empty: nothing is saved). Scans it once (SavedSlots).
    Conversations(boost::asio::any_io_executor ex, std::filesystem::path root, config::SlotSaveConfig cfg,
                  core::Clock& clock, RecentEvents& events);
    ~Conversations();
    Conversations(const Conversations&) = delete;
    Conversations& operator=(const Conversations&) = delete;

    void configure(const config::SlotSaveConfig& cfg) { store_.configure(cfg); }  // a reload
    nlohmann::json status() const { return store_.status(); }

    // --- Around an engine's life (the broker) ---
    // A new run of `model` starts: when saving is on and its kind keeps slot files, the engine is launched
    // with its launch's folder (`spec` changed by the kind) and the launch's argv at a fixed port comes back
    // for prepare(); else nullopt. Forgets the previous run's slot state either way.
    std::optional<std::vector<std::string>> with_slot_files(
        const std::string& model, const engines::Kind& kind, const config::Config& cfg,
        const config::ModelConfig& mc, const engines::Placement& where, engines::EngineSpec& spec);
    // Makes the launch's folder ready while `engine` loads; from then on its slots are saved and restored.
    boost::asio::awaitable<void> prepare(std::string model, std::shared_ptr<engines::EngineRun> engine,
                                         std::vector<std::string> argv);
    // Whether `model`'s current run saves its slots (its folder is ready).
    bool saves(const std::string& model) const;
    // Before a stop that keeps conversations: whether saving now is worth trying (room on disk) and, if so,
    // the engine's slots saved (noted as `slots_saved`). `limit`: how long the engine may take.
    boost::asio::awaitable<void> save_before_stop(std::string model, const engines::Kind& kind,
                                                  std::shared_ptr<engines::EngineRun> engine,
                                                  std::chrono::seconds limit);

    // --- For a request (the proxy) ---
    // Whether restore has anything to try on this lease's engine (without a coroutine or the engine).
    bool has_saved(const Lease& lease) const;
    // Whether a saved slot of this run (not yet restored) contains the request's prompt probe. restore does
    // not ask again: call it only after may_restore said yes (the substring test scans saved texts).
    bool may_restore(const Lease& lease, const engines::RequestView& r) const;
    // Restores the best-matching saved slot into an idle slot and pins `body` to it: {"file", "tokens",
    // "ms", "slot"} of what was restored, or nullopt (no match, or the engine could not: the request then
    // goes on as it came). Each saved file is tried once per run.
    boost::asio::awaitable<std::optional<nlohmann::json>> restore(const Lease& lease,
                                                                  const engines::RequestView& r,
                                                                  std::string& body);
    // The first answer after a restore says whether it took: the engine's own count of prompt tokens it
    // reused (`cached`). llama.cpp can report a restore as done and then re-read the whole prompt (llama.cpp
    // issues 26676, 28276): an answer that reused less than half of what was restored is
    // `slot_restore_failed` (with the figures), never `slot_restored`. Whether it took; nullopt = the answer
    // did not say (noted as restored, unverified).
    std::optional<bool> confirm(const std::string& model, const nlohmann::json& restored,
                                std::optional<std::uint64_t> cached,
                                std::optional<std::uint64_t> prompt_tokens);

    // Cumulative, per model, for /metrics.
    struct Restores {
        std::uint64_t ok = 0, failed = 0;
    };
    Restores restores(const std::string& model) const;

  private:
    struct Run {
        const engines::EngineRun* engine = nullptr;  // which run (identity only: the broker owns it)
        std::string key;                             // its launch's folder, once prepared
        std::set<std::string> restored;              // saved files already restored into it
    };
    const Run* run_of(const Lease& lease) const;  // the lease's engine's run, when it saves slots
    void note(std::string_view kind, const std::string& model, std::string message, nlohmann::json extra,
              bool warn = false);

    boost::asio::any_io_executor ex_;
    core::Clock& clock_;
    RecentEvents& events_;
    SavedSlots store_;
    std::map<std::string, Run> runs_;  // by model name: its current run
    std::map<std::string, Restores> restores_;
    std::shared_ptr<bool> alive_ = std::make_shared<bool>(true);  // tells its coroutines it is gone
};

}  // namespace loch::broker
