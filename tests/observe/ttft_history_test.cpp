// observe/ttft_history: per-minute percentiles over the last hour.
#include "observe/ttft_history.hpp"

#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

namespace loch::observe {
namespace {

using namespace std::chrono_literals;
using Clock = TtftHistory::Clock;

TEST(TtftHistory, EachMinuteHasItsCountAndPercentilesAndAnHourIsKept) {
    TtftHistory h;
    const auto t0 = Clock::time_point{} + 10h;
    for (int i = 1; i <= 100; ++i) h.record(t0 + std::chrono::milliseconds(i * 100), i / 100.0);  // 0.01..1 s
    h.record(t0 + 90s, 2.0);  // the next minute
    auto j = h.to_json(t0 + 2min);
    ASSERT_EQ(j.size(), 2u) << j.dump();
    EXPECT_EQ(j[0]["n"], 100);
    EXPECT_DOUBLE_EQ(j[0]["p50_s"].get<double>(), 0.5);
    EXPECT_DOUBLE_EQ(j[0]["p95_s"].get<double>(), 0.95);
    EXPECT_DOUBLE_EQ(j[0]["t"].get<double>(), -119.9);
    EXPECT_EQ(j[1]["n"], 1);
    EXPECT_DOUBLE_EQ(j[1]["p95_s"].get<double>(), 2.0);
    // An hour later the first minute is gone.
    EXPECT_EQ(h.to_json(t0 + 61min).size(), 1u);
}

TEST(TtftHistory, ABusyMinuteKeepsABoundedSample) {
    TtftHistory h;
    const auto t0 = Clock::time_point{} + 10h;
    for (std::size_t i = 0; i < 3 * TtftHistory::kPerMinute; ++i) h.record(t0 + 1ms * int(i % 1000), 1.0);
    const auto j = h.to_json(t0 + 1s);
    ASSERT_EQ(j.size(), 1u);
    EXPECT_EQ(j[0]["n"], 3 * TtftHistory::kPerMinute);
    EXPECT_DOUBLE_EQ(j[0]["p50_s"].get<double>(), 1.0);
}

}  // namespace
}  // namespace loch::observe
