// observe/ttft_history — people's time to first token over the last hour, per minute, for the dashboard's
// plot (issue 54): each minute's count, p50 and p95. Filled as requests end (nothing on a timer: an idle loch
// adds nothing); a minute keeps at most kPerMinute samples (past that a new one replaces an old one in turn,
// so a busy minute's percentiles come from its samples spread over the minute).
#pragma once

#include <chrono>
#include <cstddef>
#include <deque>
#include <vector>

#include <nlohmann/json_fwd.hpp>

namespace loch::observe {

class TtftHistory {
  public:
    using Clock = std::chrono::steady_clock;
    static constexpr std::size_t kPerMinute = 4096;
    static constexpr std::size_t kMinutes = 60;

    void record(Clock::time_point t, double ttft_s);
    // [{t: the minute's start in seconds relative to now (≤ 0), n, p50_s, p95_s}], oldest first.
    nlohmann::json to_json(Clock::time_point now) const;

  private:
    struct Minute {
        Clock::time_point start;
        std::size_t seen = 0;
        std::vector<double> samples;
    };
    std::deque<Minute> minutes_;
};

}  // namespace loch::observe
