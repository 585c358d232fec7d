#include "core/time_text.hpp"

#include <chrono>

namespace loch {

// Calendar arithmetic (C++20 <chrono>) instead of gmtime_r + strftime: this is on every request's log line,
// and strftime's locale machinery was most of that line's cost.
std::string iso8601_utc(std::chrono::system_clock::time_point t) {
    using namespace std::chrono;
    const auto day = floor<days>(t);
    const year_month_day ymd{day};
    const hh_mm_ss hms{floor<seconds>(t - day)};
    char buf[24];
    const auto put = [&](int at, unsigned v, int width) {
        for (int i = width - 1; i >= 0; --i, v /= 10) buf[at + i] = static_cast<char>('0' + v % 10);
    };
    const int y = static_cast<int>(ymd.year());
    put(0, static_cast<unsigned>(y < 0 ? 0 : y > 9999 ? 9999 : y), 4);
    buf[4] = '-';
    put(5, static_cast<unsigned>(ymd.month()), 2);
    buf[7] = '-';
    put(8, static_cast<unsigned>(ymd.day()), 2);
    buf[10] = 'T';
    put(11, static_cast<unsigned>(hms.hours().count()), 2);
    buf[13] = ':';
    put(14, static_cast<unsigned>(hms.minutes().count()), 2);
    buf[16] = ':';
    put(17, static_cast<unsigned>(hms.seconds().count()), 2);
    buf[19] = 'Z';
    return std::string(buf, 20);
}

std::int64_t unix_now() {
    return std::chrono::duration_cast<std::chrono::seconds>(
               std::chrono::system_clock::now().time_since_epoch())
        .count();
}

}  // namespace loch
