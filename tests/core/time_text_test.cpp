#include "core/time_text.hpp"
#include <gtest/gtest.h>
#include <ctime>

namespace {

std::string by_strftime(std::time_t tt) {
    std::tm tm{};
    ::gmtime_r(&tt, &tm);
    char buf[32];
    std::strftime(buf, sizeof buf, "%Y-%m-%dT%H:%M:%SZ", &tm);
    return buf;
}

}  // namespace

TEST(TimeText, Iso8601MatchesTheCLibraryOnEveryKindOfDay) {
    using namespace std::chrono;
    // The epoch, leap days, the last second of a year and of a day, a far date (system_clock ends in 2262),
    // and sub-second times (cut, never rounded up).
    const std::time_t cases[] = {0,          951782400, 951868799,  1709164800, 1735689599,
                                 1764694488, 86399,     4102444800, 7258118399};
    for (const auto tt : cases) {
        const auto t = system_clock::from_time_t(tt);
        EXPECT_EQ(loch::iso8601_utc(t), by_strftime(tt)) << tt;
        EXPECT_EQ(loch::iso8601_utc(t + milliseconds(999)), by_strftime(tt)) << tt;
    }
    EXPECT_EQ(loch::iso8601_utc(system_clock::from_time_t(1764694488)), "2025-12-02T16:54:48Z");
}
