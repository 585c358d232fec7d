// engines/run — one engine run as the broker sees it, and the launcher that makes runs: the seam between the
// broker's state machine and real processes. engines::Engine (a supervised process) is the real run and
// ProcessLauncher the real launcher; the broker's unit tests drive the state machine through a fake
// launcher (tests/broker/fake_launcher.hpp, a test double) without starting anything.
#pragma once

#include <sys/types.h>

#include <chrono>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include <boost/asio/any_io_executor.hpp>
#include <boost/asio/awaitable.hpp>
#include <nlohmann/json_fwd.hpp>

#include "engines/exit.hpp"
#include "engines/spec.hpp"

namespace loch::engines {

class StateFile;

struct StartResult {
    bool ready = false;
    std::chrono::milliseconds took{0};  // spawn → ready (or → failure)
    std::optional<ExitReport> failure;  // set when !ready
};

class EngineRun {
  public:
    virtual ~EngineRun() = default;

    // Until ready, or the failure (spawn error, exit during start-up, startup timeout). Never throws for
    // engine failures. Called once.
    virtual boost::asio::awaitable<StartResult> start() = 0;
    // Ends the run (graceful, then forced); the report says how it ended. Safe in any state.
    virtual boost::asio::awaitable<ExitReport> stop() = 0;
    // Completes when the run has ended for any reason (at once if it has).
    virtual boost::asio::awaitable<ExitReport> wait_exit() = 0;
    // Called once, on the executor, when the run ends after start() began. Set it before start().
    virtual void on_exit(std::function<void(const ExitReport&)> cb) = 0;

    virtual const EngineSpec& spec() const = 0;
    virtual std::optional<pid_t> pid() const = 0;
    virtual const std::optional<ExitReport>& exit_report() const = 0;
    // The output from spawn until ready (what the kind's measure() reads), and the last `n` lines.
    virtual const std::vector<std::string>& startup_log() const = 0;
    virtual std::vector<std::string> log_tail(std::size_t n) const = 0;
    virtual nlohmann::json status_json() const = 0;

    const std::string& host() const { return spec().host; }
    std::uint16_t port() const { return spec().port; }

    // Who can say why a SIGKILL loch did not send ended the run (the broker, from its memory cgroup's
    // oom_kill counter and its own figures): asked once, before the report is stored or anyone sees it.
    // Set it before start().
    using KillWitness = std::function<std::optional<KillEvidence>()>;
    void on_outside_kill(KillWitness witness) { kill_witness_ = std::move(witness); }

  protected:
    // For the runs: names an outside SIGKILL in `r` (engines::name_kill) when a witness can.
    void explain_kill(ExitReport& r) const {
        if (!kill_witness_ || !is_outside_sigkill(r)) return;
        if (auto e = kill_witness_()) name_kill(r, *e);
    }

  private:
    KillWitness kill_witness_;
};

class Launcher {
  public:
    virtual ~Launcher() = default;
    virtual std::shared_ptr<EngineRun> launch(boost::asio::any_io_executor ex, EngineSpec spec) = 0;
};

// Real processes (engines::Engine), recorded in `state` (optional; must outlive the launcher's runs).
class ProcessLauncher : public Launcher {
  public:
    explicit ProcessLauncher(StateFile* state = nullptr) : state_(state) {}
    std::shared_ptr<EngineRun> launch(boost::asio::any_io_executor ex, EngineSpec spec) override;

  private:
    StateFile* state_;
};

}  // namespace loch::engines
