// A cold start's timeline (issue 33: loch's part of a cold start ≤ 5 ms): the broker records, for the request
// that found its model stopped, when the devices were read, the footprint known, the engine launched and
// ready, its facts read and the request granted; /loch/status shows it as `last_cold_start` in ms, and
// bench/proxy_overhead prints its medians.
#include <gtest/gtest.h>

#include <boost/asio/co_spawn.hpp>
#include <boost/asio/use_future.hpp>

#include "broker_fixture.hpp"

namespace loch::broker {
namespace {

using namespace test_fixture;

TEST_F(BrokerTest, AColdStartRecordsItsTimelineAndTheEnginesOwnPart) {
    add_model("m", 1 * kGiB);
    fake->configure = [](test::FakeRun& r) { r.ready_after = 30ms; };
    start({}, {}, {});
    auto lease = acquire("m");
    ASSERT_TRUE(settle(lease));
    ASSERT_TRUE(lease.get().valid());
    auto status = asio::co_spawn(ioc, broker->view().status(), asio::use_future);
    ASSERT_TRUE(settle(status));
    const auto st = status.get();
    nlohmann::json cold;
    for (const auto& e : st["engines"])
        if (e["name"] == "m") cold = e["last_cold_start"];
    ASSERT_TRUE(cold.is_object()) << st.dump(2);
    EXPECT_GE(cold["engine_own_ms"].get<double>(), 30.0);
    EXPECT_GE(cold["engine_ready_ms"].get<double>(), cold["engine_own_ms"].get<double>() - 1);
    EXPECT_GE(cold["total_ms"].get<double>(), cold["engine_ready_ms"].get<double>());
    EXPECT_NEAR(cold["loch_ms"].get<double>(),
                cold["total_ms"].get<double>() - cold["engine_own_ms"].get<double>(), 0.01);
    for (const char* phase : {"devices_read_ms", "planned_ms", "admitted_ms", "facts_ms", "granted_ms"})
        EXPECT_TRUE(cold.contains(phase)) << phase;
}

// A start that failed leaves no stale record: the next cold start is timed from its own request.
TEST_F(BrokerTest, AFailedStartDoesNotLeaveItsArrivalInTheNextColdStartsTimeline) {
    add_model("m", 1 * kGiB);
    cfg.restart.backoff_initial = std::chrono::seconds(0);
    int runs = 0;
    fake->configure = [&runs](test::FakeRun& r) {
        r.ready_after = ++runs == 1 ? 400ms : 20ms;
        if (runs == 1) r.fail_start = engines::ExitReport{};
    };
    start(fast());
    auto failed = acquire("m");
    ASSERT_TRUE(settle(failed));
    ASSERT_TRUE(error_of(failed));
    auto lease = acquire("m");
    ASSERT_TRUE(settle(lease));
    ASSERT_TRUE(lease.get().valid());
    auto status = asio::co_spawn(ioc, broker->view().status(), asio::use_future);
    ASSERT_TRUE(settle(status));
    const auto st = status.get();
    for (const auto& e : st["engines"])
        if (e["name"] == "m") EXPECT_LT(e["last_cold_start"]["total_ms"].get<double>(), 300.0) << st.dump(2);
}

}  // namespace
}  // namespace loch::broker
