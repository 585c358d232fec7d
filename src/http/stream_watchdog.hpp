// http/stream_watchdog — a streamed request's watchdog (the model's `watchdog`): the engine's silence, not
// the client's slowness, ends a stream.
#pragma once

#include <chrono>
#include <memory>

#include <boost/asio/any_io_executor.hpp>
#include <boost/asio/steady_timer.hpp>

#include "http/relays.hpp"

namespace loch::http {

// A streamed request's watchdog: an upstream read that waits longer than `limit` is cancelled (and then ends
// with beast's timeout). One timer per request, not per read: a read only notes when it starts and ends, and
// the timer, when it fires before the limit, waits for what is left (a Beast stream timeout armed and
// cancelled a timer on every event). Time spent writing to a slow client is not the engine's silence. Holds
// the relay weakly; destroyed with the relay, it cancels its timer.
class StreamWatchdog {
  public:
    StreamWatchdog(boost::asio::any_io_executor ex, const std::shared_ptr<RelayState>& relay,
                   std::chrono::steady_clock::duration limit)
        : s_(std::make_shared<State>(std::move(ex), relay, limit)) {
        arm(s_, limit);
    }
    ~StreamWatchdog() { s_->timer.cancel(); }
    StreamWatchdog(const StreamWatchdog&) = delete;
    StreamWatchdog& operator=(const StreamWatchdog&) = delete;
    void reading() {  // an upstream read starts
        s_->since = std::chrono::steady_clock::now();
        s_->waiting = true;
    }
    void heard() { s_->waiting = false; }  // it ended

  private:
    struct State {
        State(boost::asio::any_io_executor ex, const std::shared_ptr<RelayState>& r,
              std::chrono::steady_clock::duration l)
            : timer(std::move(ex)), relay(r), limit(l), since(std::chrono::steady_clock::now()) {}
        boost::asio::steady_timer timer;
        std::weak_ptr<RelayState> relay;
        std::chrono::steady_clock::duration limit;
        std::chrono::steady_clock::time_point since;  // when the current (or last) read began
        bool waiting = true;  // a read waits on the engine (the request's head at first)
    };
    static void arm(const std::shared_ptr<State>& s, std::chrono::steady_clock::duration d) {
        s->timer.expires_after(d);
        s->timer.async_wait([weak = std::weak_ptr<State>(s)](boost::system::error_code ec) {
            const auto st = weak.lock();
            if (ec || !st) return;
            const auto relay = st->relay.lock();
            if (!relay || relay->done) return;
            if (!st->waiting) return arm(st, st->limit);  // writing to the client: no read to time
            const auto left = st->since + st->limit - std::chrono::steady_clock::now();
            if (left > std::chrono::steady_clock::duration::zero()) return arm(st, left);
            relay->silent = true;
            if (relay->upstream) {
                boost::system::error_code ignored;
                relay->upstream->socket().cancel(ignored);
            }
        });
    }
    std::shared_ptr<State> s_;
};

}  // namespace loch::http
