// core/clock — time read through a seam, so that a test can run it virtually.
//
// `Clock` is steady time (std::chrono::steady_clock's points). `Timer` is a one-shot timer on an io_context
// that expires by a Clock: with `steady_clock()` it is an asio::steady_timer; with a `ManualClock` (tests) it
// expires when the test advances that clock past its expiry, so a suite that waits minutes of engine
// start-ups, keep-alives and back-offs runs in no real time at all.
//
// Only waits that measure time go through a Timer. A timer used as a signal (never expires, cancelled to wake
// its waiter) stays an asio::steady_timer.
#pragma once

#include <chrono>
#include <set>
#include <utility>

#include <boost/asio/any_io_executor.hpp>
#include <boost/asio/awaitable.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/system/error_code.hpp>

namespace loch::core {

class Timer;

class Clock {
  public:
    using duration = std::chrono::steady_clock::duration;
    using time_point = std::chrono::steady_clock::time_point;

    virtual ~Clock() = default;
    virtual time_point now() const = 0;

  protected:
    friend class Timer;
    // The timer's expiry changed (or it was cancelled): make its wait end at that time.
    virtual void arm(Timer& t) = 0;
    // The timer goes away or changes its expiry.
    virtual void disarm(Timer& t) = 0;
};

// The process's steady clock: immutable, one for everybody.
Clock& steady_clock();

class Timer {
  public:
    Timer(boost::asio::any_io_executor ex, Clock& clock);
    ~Timer();
    Timer(const Timer&) = delete;
    Timer& operator=(const Timer&) = delete;

    // A wait in progress ends with operation_aborted, as asio's timers do when their expiry changes.
    void expires_at(Clock::time_point t);
    void expires_after(Clock::duration d) { expires_at(clock_.now() + d); }
    Clock::time_point expiry() const { return expiry_; }
    // A wait in progress ends with operation_aborted; the expiry stays (a later wait ends at it).
    void cancel();
    // Ends at the expiry (no error) or when cancelled (operation_aborted).
    boost::asio::awaitable<boost::system::error_code> wait();

    Clock& clock() const { return clock_; }

  private:
    friend class SteadyClock;
    friend class ManualClock;
    Clock& clock_;
    boost::asio::steady_timer inner_;
    Clock::time_point expiry_ = Clock::time_point::max();
    bool fired_ = false;  // the ManualClock expired it (its inner timer was cancelled to wake the wait)
};

// Waits `d` by `clock`.
boost::asio::awaitable<void> sleep_for(boost::asio::any_io_executor ex, Clock& clock, Clock::duration d);

// A clock that moves only when told (tests). Timers armed on it wake when `advance` passes their expiry;
// the woken coroutines run when the io_context next runs (poll it after advancing).
class ManualClock final : public Clock {
  public:
    time_point now() const override { return now_; }
    // Moves time to `t` (never back), expiring every timer due by then.
    void advance_to(time_point t);
    void advance(duration d) { advance_to(now_ + d); }
    // The earliest expiry among the armed timers (time_point::max() when none).
    time_point next_expiry() const;

  protected:
    void arm(Timer& t) override;
    void disarm(Timer& t) override;

  private:
    time_point now_ = time_point(std::chrono::hours(24));  // far from 0: `now - 1h` stays positive
    std::set<std::pair<time_point, Timer*>> armed_;
};

}  // namespace loch::core
