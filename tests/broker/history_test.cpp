// broker/history: points only on change, the window, and the marks.
#include "broker/history.hpp"

#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

namespace loch::broker {
namespace {

using namespace std::chrono_literals;
using Clock = History::Clock;

std::vector<HistoryHolder> holders(std::uint64_t chat, std::uint64_t outside,
                                   const char* source = "formula") {
    std::vector<HistoryHolder> h;
    if (chat) h.push_back({"chat", chat, source});
    h.push_back({"outside", outside, "measured"});
    return h;
}

TEST(History, APointOnlyWhenAHolderChangesAndOutsideDriftBelowAStepIsNone) {
    History h;
    const auto t0 = Clock::time_point{} + 10h;
    h.memory(t0, "gpu", holders(0, 1 << 30));
    h.memory(t0 + 1s, "gpu", holders(0, (1 << 30) + (1 << 20)));         // outside drifted 1 MiB: no point
    h.memory(t0 + 2s, "gpu", holders(8ull << 30, 1 << 30));              // chat loads
    h.memory(t0 + 3s, "gpu", holders(8ull << 30, 1 << 30, "measured"));  // measured: a point
    h.memory(t0 + 4s, "gpu", holders(8ull << 30, 1 << 30, "measured"));  // the same: none
    h.memory(t0 + 5s, "gpu", holders(0, (1ull << 30) + History::kOutsideStep));  // evicted, outside moved
    h.queue(t0, 0);
    h.queue(t0 + 1s, 0);
    h.queue(t0 + 2s, 3);
    const auto j = h.to_json(t0 + 10s);
    const auto& g = j["devices"]["gpu"];
    ASSERT_EQ(g.size(), 4u) << g.dump();
    EXPECT_DOUBLE_EQ(g[0]["t"].get<double>(), -10);
    EXPECT_DOUBLE_EQ(g[1]["t"].get<double>(), -8);
    EXPECT_EQ(g[1]["holders"][0]["name"], "chat");
    EXPECT_EQ(g[1]["holders"][0]["source"], "formula");
    EXPECT_EQ(g[2]["holders"][0]["source"], "measured");
    EXPECT_EQ(g[3]["holders"].size(), 1u);
    ASSERT_EQ(j["queue"].size(), 2u);
    EXPECT_EQ(j["queue"][1]["waiting"], 3);
}

TEST(History, TheWindowStartsWithTheStateBeforeItAndOldMarksGo) {
    History h(1h);
    const auto t0 = Clock::time_point{} + 10h;
    h.memory(t0, "gpu", holders(4ull << 30, 0));
    h.mark(t0, "evict", "old", "gpu", "evicted to make room for 'chat'");
    h.memory(t0 + 2h, "gpu", holders(8ull << 30, 0));
    h.mark(t0 + 2h, "refused", "big", "gpu", "does not fit");
    const auto j = h.to_json(t0 + 2h + 30min);
    const auto& g = j["devices"]["gpu"];
    ASSERT_EQ(g.size(), 2u) << g.dump();
    EXPECT_DOUBLE_EQ(g[0]["t"].get<double>(), -3600);  // the state the window starts with, at its start
    EXPECT_EQ(g[0]["holders"][0]["bytes"], 4ull << 30);
    EXPECT_DOUBLE_EQ(g[1]["t"].get<double>(), -1800);
    ASSERT_EQ(j["marks"].size(), 1u);
    EXPECT_EQ(j["marks"][0]["kind"], "refused");
    EXPECT_EQ(j["marks"][0]["model"], "big");
}

TEST(History, ASeriesIsBoundedWhateverTheChurn) {
    History h;
    const auto t0 = Clock::time_point{} + 10h;
    for (std::size_t i = 0; i < History::kMaxPoints + 100; ++i)
        h.memory(t0 + std::chrono::milliseconds(i), "gpu", holders(1 + i % 2, 0));
    EXPECT_EQ(h.to_json(t0 + 1min)["devices"]["gpu"].size(), History::kMaxPoints);
}

}  // namespace
}  // namespace loch::broker
