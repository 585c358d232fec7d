// observe/loop_lag — how late loch's one event loop runs.
//
// Everything loch does runs on one io_context thread, so anything that blocks it (a blocking syscall, a long
// computation) delays every request, /health and /metrics by as long. A timer asks to wake every `period`;
// how late it wakes is the loop's lag. The figures go to /loch/status ("event_loop") and /metrics
// (loch_event_loop_lag_seconds, a histogram, and the last and highest lag as gauges). A wake later than
// `warn_over` logs a warning with what was running, as the owner describes it (connections, engines
// starting).
//
// Costs one timer wake per period (10 a second by default: a few microseconds of CPU each) while the owner is
// busy; while it is idle (`busy` says no: no connection open), one per `idle_period` — an idle loch sleeps
// (issue 55) — and `wake_up()` brings the short period back at once when work arrives.
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <string>

#include <boost/asio/any_io_executor.hpp>
#include <boost/asio/steady_timer.hpp>
#include <nlohmann/json_fwd.hpp>

namespace loch::observe {

class LoopLag {
  public:
    struct Options {
        std::chrono::milliseconds period{100};
        std::chrono::milliseconds warn_over{250};
        std::chrono::milliseconds idle_period{60000};
    };
    // `describe`: what was running, for the warning; `on_sample`: each lag in seconds (the metrics'
    // histogram).
    // `busy`: whether work is under way (empty: always).
    LoopLag(boost::asio::any_io_executor ex, std::function<std::string()> describe,
            std::function<void(double)> on_sample, Options options, std::function<bool()> busy = {});
    LoopLag(const LoopLag&) = delete;
    LoopLag& operator=(const LoopLag&) = delete;

    void start();
    void stop();
    // Work arrived: the next wake comes within `period`, not the idle period.
    void wake_up();

    double last_seconds() const { return last_s_; }
    double max_seconds() const { return max_s_; }
    std::uint64_t samples() const { return samples_; }
    std::uint64_t warnings() const { return warnings_; }
    std::chrono::steady_clock::time_point next_wake() const { return timer_.expiry(); }
    // {"lag_s", "max_lag_s", "samples", "late_wakes" (over warn_over), "warn_over_s", "period_s"}
    nlohmann::json json() const;

    // One sample (what the timer's wake computes; public for tests): `late` past the requested wake.
    void sample(std::chrono::steady_clock::duration late);

  private:
    void arm();

    boost::asio::steady_timer timer_;
    std::function<std::string()> describe_;
    std::function<void(double)> on_sample_;
    std::function<bool()> busy_;
    Options options_;
    bool running_ = false;
    double last_s_ = 0, max_s_ = 0;
    std::uint64_t samples_ = 0, warnings_ = 0;
};

}  // namespace loch::observe
