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

}  // namespace
}  // namespace loch::observe
