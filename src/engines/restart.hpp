// engines/restart — backoff and quarantine for a model whose engine keeps failing.
//
// Every failed run (crash, out of memory, startup timeout, spawn failure; not `stopped`, not
// `port_in_use`) is recorded. Before a start the broker asks check(): wait the backoff
// (backoff_initial × 2^(crashes−1), at most backoff_max, counted from the last crash), or refuse because
// the model is quarantined: max_crashes failures within `window` → refused for `quarantine`, with a
// message that names the count, the window and the last failure. After the quarantine the slate is clean.
#pragma once

#include <chrono>
#include <deque>
#include <optional>
#include <string>

#include "config/config.hpp"
#include "engines/exit.hpp"

namespace loch::engines {

class CrashTracker {
  public:
    using Clock = std::chrono::steady_clock;

    explicit CrashTracker(std::string model_name, config::RestartConfig policy = {});

    // Whether this kind of exit counts against the model.
    static bool counts_as_crash(const ExitReport& r);

    // Records `r` if it counts; returns whether it did.
    bool record(Clock::time_point now, const ExitReport& r);

    struct Verdict {
        bool quarantined = false;
        Clock::duration wait{0};      // backoff still to wait before starting (0 = start now)
        Clock::duration retry_in{0};  // when quarantined: time until it lifts
        std::string message;          // when quarantined: "model 'x' is quarantined: 3 failures within 600 s
                                      //  (last: exit 139 / SIGSEGV); retry in 840 s"
    };
    Verdict check(Clock::time_point now);

    std::size_t failures_in_window(Clock::time_point now) const;
    const std::optional<ExitReport>& last_failure() const { return last_; }
    void clear();  // forget everything (config reload, admin)

  private:
    void prune(Clock::time_point now);

    std::string model_;
    config::RestartConfig policy_;
    std::deque<Clock::time_point> failures_;
    std::optional<ExitReport> last_;
    std::optional<Clock::time_point> quarantined_until_;
};

}  // namespace loch::engines
