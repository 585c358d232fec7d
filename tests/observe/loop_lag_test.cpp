// The event loop's lag: a handler that blocks the loop shows as a late wake of the lag timer, in the figures
// and as one warning; a loop that runs free shows no lag.
#include "observe/loop_lag.hpp"

#include <gtest/gtest.h>

#include <boost/asio/io_context.hpp>
#include <boost/asio/post.hpp>
#include <nlohmann/json.hpp>
#include <thread>

namespace loch::observe {
namespace {

using namespace std::chrono_literals;

TEST(LoopLag, ABlockedLoopIsSeenAsOneLateWakeWithTheWarningAndTheFigures) {
    boost::asio::io_context ioc;
    std::vector<double> samples;
    int described = 0;
    LoopLag lag(
        ioc.get_executor(), [&] { return ++described, std::string("a test that sleeps"); },
        [&](double s) { samples.push_back(s); }, LoopLag::Options{20ms, 150ms});
    lag.start();
    ioc.run_for(100ms);  // free-running: wakes on time
    ASSERT_GE(lag.samples(), 3u);
    EXPECT_LT(lag.max_seconds(), 0.1);
    EXPECT_EQ(lag.warnings(), 0u);
    // A handler that blocks the thread for 400 ms (what a blocking wait4 did, for minutes).
    boost::asio::post(ioc, [] { std::this_thread::sleep_for(400ms); });
    ioc.restart();
    ioc.run_for(700ms);  // the block, then the late wake and a few on time
    lag.stop();
    EXPECT_GE(lag.max_seconds(), 0.3);
    EXPECT_EQ(lag.warnings(), 1u) << "one late wake, not a burst of catch-up samples";
    EXPECT_EQ(described, 1) << "the warning says what was running";
    EXPECT_EQ(samples.size(), lag.samples());
    const auto j = lag.json();
    EXPECT_EQ(j["late_wakes"], 1);
    EXPECT_GE(j["max_lag_s"].get<double>(), 0.3);
}

// Issue 55: an idle loch sleeps. With nothing under way the probe wakes once per idle period, not ten times a
// second; work arriving (wake_up: a connection) brings the short period back at once.
TEST(LoopLag, WhileIdleItWakesOncePerIdlePeriodAndWorkBringsTheShortPeriodBack) {
    boost::asio::io_context ioc;
    bool busy = false;
    LoopLag lag(
        ioc.get_executor(), [] { return std::string(); }, [](double) {},
        LoopLag::Options{20ms, 150ms, 5000ms}, [&] { return busy; });
    lag.start();
    ioc.run_for(200ms);
    EXPECT_EQ(lag.samples(), 1u) << "after its first wake an idle probe waits the idle period";
    EXPECT_GT(lag.next_wake() - std::chrono::steady_clock::now(), 4s);
    busy = true;
    lag.wake_up();
    EXPECT_LE(lag.next_wake() - std::chrono::steady_clock::now(), 20ms);
    ioc.restart();
    ioc.run_for(200ms);
    lag.stop();
    EXPECT_GE(lag.samples(), 5u) << "busy: every 20 ms again";
    EXPECT_EQ(lag.warnings(), 0u) << "the wait cut short is not a late wake";
}

}  // namespace
}  // namespace loch::observe
