#include "observe/ttft_history.hpp"

#include <algorithm>
#include <cmath>

#include <nlohmann/json.hpp>

namespace loch::observe {

namespace {

// The nearest-rank percentile of sorted samples.
double percentile(const std::vector<double>& sorted, double p) {
    const auto rank = static_cast<std::size_t>(std::ceil(p / 100.0 * double(sorted.size())));
    return sorted[std::clamp<std::size_t>(rank, 1, sorted.size()) - 1];
}

}  // namespace

void TtftHistory::record(Clock::time_point t, double ttft_s) {
    if (minutes_.empty() || t - minutes_.back().start >= std::chrono::minutes(1))
        minutes_.push_back({t, 0, {}});
    auto& m = minutes_.back();
    if (m.samples.size() < kPerMinute)
        m.samples.push_back(ttft_s);
    else
        m.samples[m.seen % kPerMinute] = ttft_s;
    ++m.seen;
    while (!minutes_.empty() && t - minutes_.front().start >= std::chrono::minutes(kMinutes))
        minutes_.pop_front();
}

nlohmann::json TtftHistory::to_json(Clock::time_point now) const {
    auto out = nlohmann::json::array();
    for (const auto& m : minutes_) {
        if (now - m.start >= std::chrono::minutes(kMinutes)) continue;
        auto sorted = m.samples;
        std::sort(sorted.begin(), sorted.end());
        out.push_back({{"t", std::chrono::duration<double>(m.start - now).count()},
                       {"n", m.seen},
                       {"p50_s", percentile(sorted, 50)},
                       {"p95_s", percentile(sorted, 95)}});
    }
    return out;
}

}  // namespace loch::observe
