#include "core/clock.hpp"

#include <boost/asio/as_tuple.hpp>
#include <boost/asio/use_awaitable.hpp>

namespace loch::core {

namespace asio = boost::asio;

class SteadyClock final : public Clock {
  public:
    time_point now() const override { return std::chrono::steady_clock::now(); }

  protected:
    void arm(Timer& t) override { t.inner_.expires_at(t.expiry_); }
    void disarm(Timer&) override {}
};

Clock& steady_clock() {
    // Stateless: one shared instance holds nothing that changes.
    static SteadyClock clock;
    return clock;
}

Timer::Timer(asio::any_io_executor ex, Clock& clock) : clock_(clock), inner_(std::move(ex)) {
    inner_.expires_at(asio::steady_timer::time_point::max());
}

Timer::~Timer() {
    clock_.disarm(*this);
}

void Timer::expires_at(Clock::time_point t) {
    clock_.disarm(*this);
    expiry_ = t;
    fired_ = false;
    inner_.cancel();
    clock_.arm(*this);
}

void Timer::cancel() {
    // As asio's: the expiry stays, a later wait() ends at it.
    fired_ = false;
    inner_.cancel();
}

asio::awaitable<boost::system::error_code> Timer::wait() {
    auto [ec] = co_await inner_.async_wait(asio::as_tuple(asio::use_awaitable));
    if (ec == asio::error::operation_aborted && fired_) {
        fired_ = false;
        co_return boost::system::error_code{};
    }
    co_return ec;
}

asio::awaitable<void> sleep_for(asio::any_io_executor ex, Clock& clock, Clock::duration d) {
    Timer t(std::move(ex), clock);
    t.expires_after(d);
    co_await t.wait();
}

void ManualClock::advance_to(time_point t) {
    if (t > now_) now_ = t;
    while (!armed_.empty() && armed_.begin()->first <= now_) {
        Timer* timer = armed_.begin()->second;
        armed_.erase(armed_.begin());
        // A wait in progress ends (aborted, read as expired); a later one ends at once.
        timer->fired_ = true;
        timer->inner_.expires_at(asio::steady_timer::time_point::min());
    }
}

Clock::time_point ManualClock::next_expiry() const {
    return armed_.empty() ? time_point::max() : armed_.begin()->first;
}

void ManualClock::arm(Timer& t) {
    t.inner_.expires_at(asio::steady_timer::time_point::max());
    if (t.expiry_ == time_point::max()) return;
    if (t.expiry_ <= now_) {
        t.inner_.expires_at(asio::steady_timer::time_point::min());  // due already: the wait ends at once
        return;
    }
    armed_.emplace(t.expiry_, &t);
}

void ManualClock::disarm(Timer& t) {
    armed_.erase({t.expiry_, &t});
}

}  // namespace loch::core
