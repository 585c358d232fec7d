// engines/state_file — which engines loch is running, on disk, so that the next loch can clean up after a
// crashed one.
//
// <state_dir>/engines.json holds loch's own PID + start time and one record per running engine (PID,
// process group, start time in ticks from /proc/PID/stat, argv, port). It is rewritten atomically
// (temp file + rename) on every change. <state_dir>/loch.lock (flock) makes one loch the owner of a state
// dir: a second loch using the same dir is refused, so it can never kill the first one's engines.
//
// cleanup_stale(): for each record of a previous loch, kill the process group only if the PID still has
// the recorded start time AND the recorded argv — a recycled PID is never killed — then wait until it is
// gone (SIGTERM, then SIGKILL after 2 s). Then every process that still carries a record's tag (what the
// engine forked, in any group) is SIGKILLed: the tag is random per spawn, so nothing else matches.
#pragma once

#include <sys/types.h>

#include <cstdint>
#include <filesystem>
#include <string>
#include <vector>

namespace loch::engines {

struct EngineRecord {
    std::string model;
    pid_t pid = 0;
    pid_t pgid = 0;
    std::uint64_t start_ticks = 0;  // /proc/PID/stat field 22
    std::vector<std::string> argv;
    std::uint16_t port = 0;
    std::int64_t started_unix = 0;  // seconds since the epoch (for people)
    std::string tag;                // LOCH_ENGINE_TAG (engines/process.hpp): finds what the engine forked

    friend bool operator==(const EngineRecord&, const EngineRecord&) = default;
};

struct StateSnapshot {
    pid_t owner_pid = 0;
    std::uint64_t owner_start_ticks = 0;
    std::vector<EngineRecord> engines;
};

// Read/write engines.json. read_state() returns an empty snapshot for a missing file and throws
// std::runtime_error (with the path) for an unreadable or corrupt one.
StateSnapshot read_state(const std::filesystem::path& file);
void write_state(const std::filesystem::path& file, const StateSnapshot& s);

struct CleanupResult {
    std::vector<EngineRecord> killed;
    std::vector<std::string> skipped;  // "pid 1234 (model x): start time differs: a different process now"
    std::vector<std::string> descendants_killed;  // "model x: pid 4321, 4322" (found by the engine's tag)
};

// Verified kill of every record; never touches a PID whose start time or argv differ.
CleanupResult kill_recorded_engines(const std::vector<EngineRecord>& records);

class StateFile {
  public:
    // Creates state_dir if needed and takes the lock. Throws std::runtime_error if another running loch
    // holds it ("state dir X is in use by loch pid N").
    explicit StateFile(std::filesystem::path state_dir);
    ~StateFile();
    StateFile(const StateFile&) = delete;
    StateFile& operator=(const StateFile&) = delete;

    // Kills the engines a previous (crashed) loch left behind, then empties the file. Call once at start.
    CleanupResult cleanup_stale();

    void add(const EngineRecord& r);
    void remove(pid_t pid);
    const std::vector<EngineRecord>& records() const { return current_.engines; }
    std::filesystem::path file() const;

  private:
    void save();

    std::filesystem::path dir_;
    int lock_fd_ = -1;
    StateSnapshot current_;
};

// Convenience for `loch serve` start-up: open (lock) state_dir, clean up, release.
CleanupResult cleanup_stale(const std::filesystem::path& state_dir);

}  // namespace loch::engines
