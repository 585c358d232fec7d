// engines/engine — one supervised engine process, of any kind (engines/kind.hpp builds its spec): the object
// the broker holds per running model.
//
// Life of an Engine: create() → start() [spawn → poll GET <health_path> until 200 | process exit |
// startup timeout | stopped by a signal for spec.hang_after (killed as `hung`); an empty health path: until
// the port accepts] → ready, serving on host():port(), its health watched (no answer for spec.hang_after →
// killed as `hung`) → stop() [SIGTERM to the process group, SIGKILL after stop_grace] or the process ends by
// itself (on_exit / wait_exit report why). An Engine runs once; a restart is a new Engine (the broker
// applies CrashTracker's backoff/quarantine between them).
//
// All methods run on the executor given to create() (one io_context, no thread per engine). Destroying an
// Engine whose process still runs SIGKILLs the process group and reaps it synchronously.

#pragma once

#include <sys/types.h>

#include <chrono>
#include <filesystem>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include <boost/asio/any_io_executor.hpp>
#include <boost/asio/awaitable.hpp>
#include <nlohmann/json_fwd.hpp>

#include "engines/exit.hpp"
#include "engines/run.hpp"
#include "engines/spec.hpp"
#include "engines/state_file.hpp"

namespace loch::engines {

class Process;

enum class EngineState {
    created,   // not started yet
    starting,  // spawned, waiting for health
    ready,     // healthy: send requests to host():port()
    stopping,  // stop() in progress
    stopped,   // stopped by loch (exit report kind `stopped`)
    failed,    // ended on its own, or never became ready (exit report says why)
};
std::string_view to_string(EngineState s);

class Engine final : public EngineRun {
  public:
    // `state` (optional, must outlive the Engine) gets a record while the process runs.
    static std::shared_ptr<Engine> create(boost::asio::any_io_executor ex, EngineSpec spec,
                                          StateFile* state = nullptr);
    ~Engine();
    Engine(const Engine&) = delete;
    Engine& operator=(const Engine&) = delete;

    // Spawn and wait until healthy. Never throws for engine failures: a spawn error, an exit during
    // start-up (classified at once, not at the timeout) or the startup timeout (the group is killed) come
    // back as StartResult::failure. Call once.
    boost::asio::awaitable<StartResult> start() override;

    // SIGTERM to the group, SIGKILL after spec().stop_grace; completes when the process is reaped.
    // Returns the report (kind `stopped` unless it had already failed). Safe to call in any state.
    boost::asio::awaitable<ExitReport> stop() override;

    // Kills the process group at once because it stopped answering (`why` goes into the report, kind
    // `hung`). No-op once it ended. The health watch calls it; so may the broker.
    void kill_hung(std::string why);

    // Completes when the process has ended for any reason (immediately if it already has).
    boost::asio::awaitable<ExitReport> wait_exit() override;

    // Called once, on the executor, when the run ends: crash, stop, startup timeout, or a spawn failure
    // inside start(). Set it before start().
    void on_exit(std::function<void(const ExitReport&)> cb) override;

    EngineState state() const { return state_; }
    const EngineSpec& spec() const override { return spec_; }
    const std::string& model_name() const { return spec_.model_name; }
    std::optional<pid_t> pid() const override;
    std::chrono::system_clock::time_point started_at() const { return started_at_; }
    // spawn → ready; the broker's eviction cost ("cheap to reload") uses it.
    std::optional<std::chrono::milliseconds> load_time() const { return load_time_; }
    const std::optional<ExitReport>& exit_report() const override { return exit_; }

    // Last `n` output lines, oldest first.
    std::vector<std::string> log_tail(std::size_t n) const override;
    const std::filesystem::path& log_file() const { return spec_.log_file; }
    // The output from spawn until ready (its last kStartupLogLines lines, read back when the engine became
    // ready): what the kind's measure() reads (engines/kind.hpp).
    static constexpr std::size_t kStartupLogLines = 20000;
    const std::vector<std::string>& startup_log() const override { return startup_log_; }

    // {"model","state","host","port","pid","started_at","load_ms","log_file","argv","exit":{…}|null}
    nlohmann::json status_json() const override;

    struct Private;  // construction key

    Engine(Private, boost::asio::any_io_executor ex, EngineSpec spec, StateFile* state);

  private:
    boost::asio::awaitable<void> watch_exit(std::weak_ptr<Engine> self);
    static boost::asio::awaitable<void> watch_health(std::weak_ptr<Engine> self);
    void finish(int wait_status);

    boost::asio::any_io_executor ex_;
    EngineSpec spec_;
    StateFile* state_file_ = nullptr;
    EngineState state_ = EngineState::created;
    std::unique_ptr<Process> proc_;
    std::chrono::system_clock::time_point started_at_{};
    std::optional<std::chrono::milliseconds> load_time_;
    std::optional<ExitReport> exit_;
    std::vector<std::string> startup_log_;
    bool stop_requested_ = false;
    bool startup_timed_out_ = false;
    std::string hung_;  // why kill_hung() was called
    std::function<void(const ExitReport&)> on_exit_;
    std::weak_ptr<Engine> weak_self_;
};

// GET http://host:port/path once, with a timeout (core/http_client); returns the HTTP status, or 0 when no
// response (refused, reset, timeout). An empty path only connects: accepting counts as 200.
boost::asio::awaitable<unsigned> http_get_status(std::string host, std::uint16_t port, std::string path,
                                                 std::chrono::milliseconds timeout);

}  // namespace loch::engines
