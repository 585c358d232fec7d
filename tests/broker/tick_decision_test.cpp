// The tick's decisions (broker/tick_decision.hpp), without a broker: which idle engines stop, how long the
// idle tick may sleep, which holders an overcommitted device evicts.
#include "broker/tick_decision.hpp"

#include <gtest/gtest.h>

namespace loch::broker {
namespace {

using namespace std::chrono_literals;

const TickTime t0{std::chrono::hours(1)};

IdleFacts ready(std::string name, std::chrono::seconds keep_alive, TickTime last_used) {
    IdleFacts f;
    f.model = std::move(name);
    f.state = ModelState::ready;
    f.keep_alive = keep_alive;
    f.last_used = last_used;
    return f;
}

std::vector<std::string> names(const std::vector<StopIdle>& stops) {
    std::vector<std::string> out;
    for (const auto& s : stops) out.push_back(s.model);
    return out;
}

TEST(KeepAlive, AnIdleEngineStopsOnceItsKeepAliveHasPassedAndSaysForHowLong) {
    const auto stops = expired_engines({ready("a", 300s, t0), ready("b", 300s, t0 + 10s)}, t0 + 305s);
    ASSERT_EQ(names(stops), std::vector<std::string>{"a"});
    EXPECT_EQ(stops[0].why, "idle for 305 s (keep_alive 300 s)");
}

TEST(KeepAlive, RunningPinnedWantedForeverOrNotReadyEnginesStay) {
    auto running = ready("running", 1s, t0);
    running.active = 1;
    auto pinned = ready("pinned", 1s, t0);
    pinned.pinned = true;
    auto wanted = ready("wanted", 1s, t0);
    wanted.wanted = true;
    auto forever = ready("forever", 1s, t0);
    forever.keep_alive.reset();
    auto loading = ready("loading", 1s, t0);
    loading.state = ModelState::loading;
    auto asleep = ready("asleep", 1s, t0);
    asleep.state = ModelState::asleep;
    EXPECT_TRUE(expired_engines({running, pinned, wanted, forever, loading, asleep}, t0 + 1h).empty());
}

TEST(KeepAlive, AZeroKeepAliveStopsAtTheFirstIdleTick) {
    EXPECT_EQ(names(expired_engines({ready("now", 0s, t0)}, t0)), std::vector<std::string>{"now"});
}

TEST(KeepAlive, TheIdleTickSleepsUntilTheFirstExpiryOrItsCap) {
    const std::vector<IdleFacts> engines{ready("a", 300s, t0), ready("b", 60s, t0 + 10s)};
    EXPECT_EQ(until_next_expiry(engines, t0 + 20s, 30s), 30s);   // b's expiry is 50 s away: the cap first
    EXPECT_EQ(until_next_expiry(engines, t0 + 40s, 30s), 30s);   // exactly the cap
    EXPECT_EQ(until_next_expiry(engines, t0 + 50s, 30s), 20s);   // b expires at t0 + 70 s
    EXPECT_EQ(until_next_expiry(engines, t0 + 80s, 30s), -10s);  // overdue: the caller ticks at once
    EXPECT_EQ(until_next_expiry({}, t0, 30s), 30s);              // nothing to expire
    auto pinned = ready("pinned", 1s, t0);
    pinned.pinned = true;
    EXPECT_EQ(until_next_expiry({pinned}, t0 + 20s, 30s), 30s);
}

TEST(Overcommit, NothingHappensWithinCapacity) {
    EXPECT_FALSE(relieve_overcommit(100, 100, {{"a", t0, 50}}).has_value());
}

TEST(Overcommit, TheLongestIdleGoFirstUntilTheirReservationsCoverTheExcess) {
    const auto r =
        relieve_overcommit(100, 130, {{"recent", t0 + 50s, 40}, {"oldest", t0, 20}, {"older", t0 + 10s, 20}});
    ASSERT_TRUE(r.has_value());
    EXPECT_EQ(r->over, 30u);
    EXPECT_EQ(r->victims, (std::vector<std::string>{"oldest", "older"}));  // 40 ≥ 30: 'recent' stays
}

TEST(Overcommit, WithNothingIdleTheDeviceIsOverAndNobodyIsEvicted) {
    const auto r = relieve_overcommit(100, 101, {});
    ASSERT_TRUE(r.has_value());
    EXPECT_EQ(r->over, 1u);
    EXPECT_TRUE(r->victims.empty());
}

}  // namespace
}  // namespace loch::broker
