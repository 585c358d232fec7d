#include "engines/restart.hpp"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

namespace loch::engines {
namespace {

using namespace std::chrono_literals;
using ::testing::HasSubstr;

ExitReport crash() {
    ExitReport r;
    r.kind = ExitKind::signal;
    r.summary = "exit 139 / SIGSEGV";
    return r;
}

config::RestartConfig policy() {
    config::RestartConfig p;
    p.max_crashes = 3;
    p.window = 600s;
    p.backoff_initial = 2s;
    p.backoff_max = 5s;
    p.quarantine = 900s;
    return p;
}

TEST(CrashTracker, BackoffDoublesUpToTheMaximum) {
    CrashTracker t("m", policy());
    const auto t0 = CrashTracker::Clock::time_point{} + 10000s;
    EXPECT_EQ(t.check(t0).wait, 0s);
    t.record(t0, crash());
    EXPECT_EQ(t.check(t0).wait, 2s);
    EXPECT_EQ(t.check(t0 + 1s).wait, 1s);
    EXPECT_EQ(t.check(t0 + 3s).wait, 0s);
    t.record(t0 + 10s, crash());
    EXPECT_EQ(t.check(t0 + 10s).wait, 4s);
    EXPECT_FALSE(t.check(t0 + 10s).quarantined);
}

TEST(CrashTracker, QuarantineAfterRepeatedCrashesThenACleanSlate) {
    CrashTracker t("qwen", policy());
    const auto t0 = CrashTracker::Clock::time_point{} + 10000s;
    t.record(t0, crash());
    t.record(t0 + 10s, crash());
    t.record(t0 + 20s, crash());
    const auto v = t.check(t0 + 60s);
    EXPECT_TRUE(v.quarantined);
    EXPECT_EQ(v.retry_in, 860s);
    EXPECT_THAT(v.message, HasSubstr("model 'qwen' is quarantined"));
    EXPECT_THAT(v.message, HasSubstr("failed 3 times within 600 s"));
    EXPECT_THAT(v.message, HasSubstr("last: exit 139 / SIGSEGV"));
    EXPECT_THAT(v.message, HasSubstr("retry in 860 s"));
    const auto after = t.check(t0 + 20s + 900s);
    EXPECT_FALSE(after.quarantined);
    EXPECT_EQ(after.wait, 0s);
    EXPECT_EQ(t.failures_in_window(t0 + 20s + 900s), 0u);
}

TEST(CrashTracker, OldCrashesLeaveTheWindowAndStopsDoNotCount) {
    CrashTracker t("m", policy());
    const auto t0 = CrashTracker::Clock::time_point{} + 10000s;
    t.record(t0, crash());
    t.record(t0 + 10s, crash());
    t.record(t0 + 700s, crash());  // the first two are out of the 600 s window by now
    EXPECT_FALSE(t.check(t0 + 700s).quarantined);
    EXPECT_EQ(t.failures_in_window(t0 + 700s), 1u);
    ExitReport stop;
    stop.kind = ExitKind::stopped;
    ExitReport port;
    port.kind = ExitKind::port_in_use;
    EXPECT_FALSE(t.record(t0 + 701s, stop));
    EXPECT_FALSE(t.record(t0 + 702s, port));
    EXPECT_EQ(t.failures_in_window(t0 + 702s), 1u);
    t.clear();
    EXPECT_EQ(t.failures_in_window(t0 + 702s), 0u);
    EXPECT_FALSE(t.last_failure().has_value());
}

}  // namespace
}  // namespace loch::engines
