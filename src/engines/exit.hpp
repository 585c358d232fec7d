// engines/exit — why an engine process ended, as a typed value the HTTP layer renders into error JSON.
//
// Classification order: hung (loch killed it because it stopped answering) → `hung`; a stop loch asked for
// → `stopped`; startup timeout → `startup_timeout`; an
// out-of-memory pattern in the log (cudaMalloc/hipMalloc failed, ggml_backend_*alloc* failed, "failed to
// allocate", std::bad_alloc, vk::OutOfDeviceMemory) → `out_of_memory`; "couldn't bind" → `port_in_use`;
// killed by a signal → `signal` (SIGKILL not sent by loch: "likely the OOM killer or a cgroup limit", until
// name_kill() below replaces the guess with what the memory cgroup's oom_kill counter says);
// nonzero status → `exit_code`; status 0 → `exited`.
#pragma once

#include <cstddef>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json_fwd.hpp>

namespace loch::engines {

enum class ExitKind {
    exited,           // status 0 without loch asking (a server should not do that)
    exit_code,        // nonzero exit status, no better explanation in the log
    signal,           // killed by a signal loch did not send
    out_of_memory,    // the log says an allocation failed (any status), or SIGKILL from outside (OOM killer)
    port_in_use,      // the engine could not bind its port (loch may retry with another)
    startup_timeout,  // not healthy within the model's startup_timeout; loch killed it
    hung,             // stopped answering its health check once ready, or stopped by a signal while loading;
                      // loch killed it
    spawn_failed,     // could not be started at all (binary missing, not executable, exec error)
    stopped,          // loch stopped it (eviction, shutdown): not a failure
};
std::string_view to_string(ExitKind k);

// What loch's memory cgroup says about a SIGKILL loch did not send: its oom_kill counter from the engine's
// start to its end (devices/memory_cgroup), the limit in force, and the broker's figures for the engine.
struct KillEvidence {
    std::uint64_t oom_kills_before = 0, oom_kills_after = 0;
    std::optional<std::uint64_t> limit;     // the cgroup's memory limit, if any
    std::string limit_file;                 // where it was read ("/sys/fs/cgroup/memory.max")
    std::optional<std::uint64_t> used;      // about what the engine held when it died
    std::string used_how;                   // how `used` was found
    std::optional<std::uint64_t> reserved;  // what loch had booked for it
    bool counted() const { return oom_kills_after > oom_kills_before; }
};

struct ExitReport {
    ExitKind kind = ExitKind::exited;
    std::optional<int> exit_code;  // set when the process exited normally
    std::optional<int> signal;     // set when killed by a signal
    std::string signal_name;       // "SIGSEGV"
    std::string summary;           // one line: "exit 139 / SIGSEGV", "out of memory: cudaMalloc failed: …"
    std::string matched_line;      // the log line that decided the classification (OOM, bind), if any
    std::vector<std::string> log_tail;  // last lines of the engine's output
    std::optional<KillEvidence> kill;   // set by name_kill()

    bool is_failure() const { return kind != ExitKind::stopped; }
};

// {"kind":"signal","exit_code":null,"signal":11,"signal_name":"SIGSEGV","summary":…,"log_tail":[…]}
void to_json(nlohmann::json& j, const ExitReport& r);

// "SIGSEGV" for 11; "signal 77" for unknown numbers.
std::string signal_name(int sig);

struct ExitFacts {
    int wait_status = 0;             // as from waitpid()
    bool stop_requested = false;     // loch sent SIGTERM/SIGKILL to stop it
    bool startup_timed_out = false;  // loch killed it because readiness never came
    std::string hung;                // non-empty: loch killed it because it hung (why, for the summary)
};

// Classify from the wait status and the engine's last output lines (oldest first). `tail_lines` of them
// are copied into the report.
ExitReport classify_exit(const ExitFacts& facts, std::span<const std::string> log_lines,
                         std::size_t tail_lines = 30);

// A SIGKILL from outside (kind out_of_memory without a log line) named by the cgroup's counter:
//   it moved, under a limit → "killed by the container's memory limit 512.00 MiB (oom_kill 0→1); it used
//   about
//                             510.00 MiB against a 100.00 MiB reservation"
//   it moved, no limit      → killed by the kernel's OOM killer (the machine ran out of memory)
//   it did not move         → kind `signal`: something outside loch sent SIGKILL, not the OOM killer
// Any other report is left as it is.
void name_kill(ExitReport& r, const KillEvidence& e);
bool is_outside_sigkill(const ExitReport& r);

// The first log line (searching from the newest) that looks like an allocation failure, if any.
std::optional<std::string> find_oom_line(std::span<const std::string> log_lines);

}  // namespace loch::engines
