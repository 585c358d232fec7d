// engines/process — one child process, supervised on Asio without a thread.
//
// spawn(): fork + execve (never a shell); the child gets its own process group (setpgid), dies with loch
// (prctl PR_SET_PDEATHSIG SIGKILL, checked against a parent that died before the prctl), stdin from
// /dev/null, every other descriptor closed. An exec failure is reported back through a close-on-exec pipe,
// so spawn() throws SpawnError with errno instead of returning a dead child (that wait is bounded, and exec
// takes microseconds: libuv's uv_spawn does the same). Exit is observed through a pidfd (pidfd_open +
// stream_descriptor) and reaped with WNOHANG only: loch's thread never waits for a child
// (docs/ARCHITECTURE.md, "Nothing blocks the loop").
//
// Output (stdout+stderr, one stream): with a log file, the child writes straight into it (O_APPEND) and
// loch reads lines back only when it needs them (output_tail: errors, exit diagnosis, the startup log).
// llama-server at -lv 4 writes ~30 lines per request; relaying them through loch cost a third of its
// syscalls per proxied request. Without a log file, the output goes through a pipe into a LogRing.
//
// PR_SET_PDEATHSIG fires when the *thread* that forked exits: spawn from the io_context's own thread.
// The destructor SIGKILLs the process group if it is still running; it is reaped at once if already gone,
// else as soon as it is (asynchronously, on the same executor): no orphans, no zombies, no wait on the loop.
//
// Environment: the child does not inherit loch's environment. Only the names in inherited_env_allowed()
// pass (locale, PATH/HOME, GPU runtime and math-library tuning), then SpawnSpec::env_add. API keys,
// tokens and anything else in loch's environment stay with loch.
//
// Tag: every child gets LOCH_ENGINE_TAG=<128 random bits> in its environment, which its own children
// inherit. When the process ends (and at the next start of loch, from the state file), every process that
// carries the tag is killed: a grandchild that left the process group, or that outlived a SIGKILL of loch,
// is found by the tag, and a process without it is never touched.
#pragma once

#include <sys/types.h>

#include <chrono>
#include <filesystem>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <stdexcept>
#include <string>
#include <vector>

#include <boost/asio/any_io_executor.hpp>
#include <boost/asio/awaitable.hpp>

#include "engines/log_ring.hpp"

namespace loch::engines {

struct SpawnSpec {
    std::vector<std::string> argv;               // argv[0]: absolute path, or looked up on PATH
    std::map<std::string, std::string> env_add;  // on top of loch's own environment
    std::filesystem::path cwd;                   // empty = loch's
    std::filesystem::path log_file;              // empty = no file; appended to, created with 0644
    std::size_t ring_lines = 500;                // lines kept for output_tail() without a log file
    // The log file is rotated (copied to <log_file>.1, replacing an older one, then truncated: the child
    // keeps its descriptor) when it grows past this; checked at spawn and every few seconds.
    std::uint64_t log_max_bytes = 64ull << 20;
    std::chrono::milliseconds log_check_every{5000};
};

class SpawnError : public std::runtime_error {
  public:
    SpawnError(const std::string& what, int err) : std::runtime_error(what), error(err) {}
    int error;  // errno
};

class Process {
  public:
    // Throws SpawnError.
    static std::unique_ptr<Process> spawn(boost::asio::any_io_executor ex, const SpawnSpec& spec);
    ~Process();
    Process(const Process&) = delete;
    Process& operator=(const Process&) = delete;

    pid_t pid() const;
    pid_t pgid() const;                 // == pid (own group)
    const std::string& tag() const;     // LOCH_ENGINE_TAG of this process and its descendants
    std::uint64_t start_ticks() const;  // /proc/PID/stat field 22, for PID identity
    std::chrono::system_clock::time_point started_at() const;

    bool exited() const;                     // reaped, and its output drained (or 500 ms passed)
    std::optional<int> wait_status() const;  // set once exited()

    // Completes when exited(); returns the wait status. Several coroutines may wait at once.
    boost::asio::awaitable<int> async_wait();
    // Completes when exited() or after `timeout`; true if exited.
    boost::asio::awaitable<bool> async_wait_for(std::chrono::milliseconds timeout);

    // Output watch, for a start-up: an engine says it is ready in its log, and the readiness poll wakes on
    // that instead of sleeping out its interval (inotify on the log file, or the pipe's reader). Off again
    // once the engine is up: every write would otherwise wake loch (llama-server logs every request).
    void watch_output();
    void stop_watching_output();
    // Completes when the process wrote output since the last call (watched), exited, or after `timeout`;
    // true unless it timed out.
    boost::asio::awaitable<bool> async_wait_output_for(std::chrono::milliseconds timeout);

    // kill(-pgid, sig): the whole group. No-op once exited.
    void signal_group(int sig);
    // Look again now whether the process has exited (wakes its exit watch; e.g. after a SIGCHLD). A wake
    // while it still runs changes nothing: loch never waits for a live child.
    void poll_exit();

    // The last `n` lines this run wrote, oldest first (a line is cut at 4 KiB; a last line without its
    // newline counts). Reads the log file's tail when there is one.
    std::vector<std::string> output_tail(std::size_t n) const;
    const std::filesystem::path& log_file() const;

    struct Impl;

  private:
    explicit Process(std::shared_ptr<Impl> impl);
    std::shared_ptr<Impl> impl_;
};

// A TCP port on 127.0.0.1 that was free a moment ago (bind port 0, read it back, close). Another program
// can take it before the engine binds: the engine then exits with `port_in_use` and loch retries.
std::uint16_t find_free_port();

// 128 random bits as 32 hex digits (std::random_device): engine tags and per-engine secrets.
std::string random_token();

// Whether an environment variable of loch's may pass to an engine (exact names and prefixes; see above).
bool inherited_env_allowed(std::string_view name);
// The value of `name` in loch's environment that an engine would inherit (nullopt when unset or not allowed).
std::optional<std::string> inherited_env_value(std::string_view name);

// The variable every engine's environment carries its tag in (Process::tag()).
inline constexpr std::string_view kTagVariable = "LOCH_ENGINE_TAG";

// SIGKILLs every process (other than loch itself) whose environment has LOCH_ENGINE_TAG=`tag`; returns
// their PIDs. A no-op for an empty tag. With `started_since_ticks` (the engine's own start, /proc stat field
// 22), only processes started since then are read: a descendant cannot be older than its ancestor, and
// reading another process's environ waits for its memory map lock (a dying GPU engine's can be held for
// seconds).
std::vector<pid_t> kill_tagged(const std::string& tag, const std::filesystem::path& proc_root = "/proc",
                               std::uint64_t started_since_ticks = 0);

// Start time of a process in clock ticks since boot (/proc/PID/stat field 22); nullopt if no such PID.
std::optional<std::uint64_t> proc_start_ticks(pid_t pid, const std::filesystem::path& proc_root = "/proc");
// A process's state letter (/proc/PID/stat field 3: R running, S sleeping, T stopped by a signal, t traced,
// Z zombie, …); nullopt if no such PID.
std::optional<char> proc_state(pid_t pid, const std::filesystem::path& proc_root = "/proc");
// The argv of a running process (/proc/PID/cmdline); nullopt if no such PID or unreadable.
std::optional<std::vector<std::string>> proc_cmdline(pid_t pid,
                                                     const std::filesystem::path& proc_root = "/proc");

}  // namespace loch::engines
