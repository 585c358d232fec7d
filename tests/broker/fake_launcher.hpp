// A test double: engine runs without processes, so that the broker's state machine can be driven in unit
// tests. Each launch makes a FakeRun whose start succeeds after `ready_after` (or fails with `fail_start`),
// and which the test can crash or let be stopped. Its on_exit fires like engines::Engine's.
#pragma once

#include <boost/asio/as_tuple.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <nlohmann/json.hpp>

#include <memory>
#include <vector>

#include "core/clock.hpp"
#include "engines/run.hpp"

namespace loch::test {

namespace asio = boost::asio;

class FakeRun : public engines::EngineRun {
  public:
    FakeRun(asio::any_io_executor ex, engines::EngineSpec spec, core::Clock& clock)
        : spec_(std::move(spec)), clock_(clock), signal_(ex) {
        signal_.expires_at(asio::steady_timer::time_point::max());
    }

    std::chrono::milliseconds ready_after{5};
    std::optional<engines::ExitReport> fail_start;  // the start fails with this instead
    std::chrono::milliseconds stop_takes{0};        // a GPU engine's teardown: it holds its memory meanwhile

    asio::awaitable<engines::StartResult> start() override {
        started = true;
        co_await core::sleep_for(signal_.get_executor(), clock_, ready_after);
        engines::StartResult r;
        r.took = ready_after;
        if (exit_) {  // stopped while starting
            r.failure = exit_;
            co_return r;
        }
        if (fail_start) {
            end(*fail_start);
            r.failure = exit_;
            co_return r;
        }
        ready = true;
        r.ready = true;
        co_return r;
    }
    asio::awaitable<engines::ExitReport> stop() override {
        ++stop_calls;
        if (!exit_ && stop_takes.count() > 0) {
            co_await core::sleep_for(signal_.get_executor(), clock_, stop_takes);
        }
        if (!exit_) {
            engines::ExitReport r;
            r.kind = engines::ExitKind::stopped;
            r.summary = "stopped by loch";
            end(r);
        }
        co_return *exit_;
    }
    asio::awaitable<engines::ExitReport> wait_exit() override {
        while (!exit_) co_await signal_.async_wait(asio::as_tuple(asio::use_awaitable));
        co_return *exit_;
    }
    void on_exit(std::function<void(const engines::ExitReport&)> cb) override { on_exit_ = std::move(cb); }

    // The engine dies on its own (a crash: counts against the model).
    void crash(int signal = 11) {
        engines::ExitReport r;
        r.kind = engines::ExitKind::signal;
        r.signal = signal;
        r.summary = "killed by signal " + std::to_string(signal);
        end(r);
    }

    // Killed by a SIGKILL loch did not send (the OOM killer, or a person): as classify_exit reports it.
    void killed_from_outside() {
        engines::ExitReport r;
        r.kind = engines::ExitKind::out_of_memory;
        r.signal = 9;
        r.signal_name = "SIGKILL";
        r.summary = "exit 137 / SIGKILL: killed from outside loch — likely the kernel OOM killer";
        end(r);
    }

    const engines::EngineSpec& spec() const override { return spec_; }
    std::optional<pid_t> pid() const override { return fake_pid; }
    std::optional<pid_t> fake_pid;  // what the broker's per-process measurement looks for
    const std::optional<engines::ExitReport>& exit_report() const override { return exit_; }
    const std::vector<std::string>& startup_log() const override { return log_; }
    std::vector<std::string> log_tail(std::size_t) const override { return log_; }
    nlohmann::json status_json() const override { return {{"model", spec_.model_name}, {"fake", true}}; }

    bool started = false, ready = false;
    int stop_calls = 0;
    bool ended() const { return exit_.has_value(); }

  private:
    void end(engines::ExitReport r) {
        if (exit_) return;
        explain_kill(r);
        exit_ = std::move(r);
        signal_.cancel();
        if (on_exit_) {
            auto cb = on_exit_;
            cb(*exit_);
        }
    }
    engines::EngineSpec spec_;
    core::Clock& clock_;         // the broker's: start-ups and stops take their time on it
    asio::steady_timer signal_;  // a signal (cancelled at the exit), not a wait for time
    std::optional<engines::ExitReport> exit_;
    std::function<void(const engines::ExitReport&)> on_exit_;
    std::vector<std::string> log_;
};

// Records every run it made; `configure` (optional) sets up each before the broker starts it.
class FakeLauncher : public engines::Launcher {
  public:
    struct Shared {
        std::vector<std::shared_ptr<FakeRun>> runs;
        std::function<void(FakeRun&)> configure;
        std::vector<std::shared_ptr<FakeRun>> of(const std::string& model) const {
            std::vector<std::shared_ptr<FakeRun>> out;
            for (const auto& r : runs)
                if (r->spec().model_name == model) out.push_back(r);
            return out;
        }
    };
    FakeLauncher(std::shared_ptr<Shared> shared, core::Clock& clock)
        : shared_(std::move(shared)), clock_(clock) {}
    std::shared_ptr<engines::EngineRun> launch(asio::any_io_executor ex, engines::EngineSpec spec) override {
        auto run = std::make_shared<FakeRun>(ex, std::move(spec), clock_);
        if (shared_->configure) shared_->configure(*run);
        shared_->runs.push_back(run);
        return run;
    }

  private:
    std::shared_ptr<Shared> shared_;
    core::Clock& clock_;
};

}  // namespace loch::test
