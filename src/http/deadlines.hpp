// http/deadlines — a client connection's read deadlines: one request's (it cancels the read rather than
// closing the socket, so the client can still be told 408) and a keep-alive connection's idle limit (armed
// once and re-armed only when it fires: a cancel per request would cost a pass of the scheduler).
#pragma once

#include <chrono>
#include <memory>

#include <boost/asio/any_io_executor.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/steady_timer.hpp>

namespace loch::http {

// A deadline for reading one request that cancels the read instead of closing the socket (what a Beast
// stream timeout does), so that the client can still be told 408. The timer's handler holds only a weak
// reference: a session that ended first is never touched.
class ReadDeadline {
  public:
    ReadDeadline(boost::asio::any_io_executor ex, boost::asio::ip::tcp::socket& socket)
        : state_(std::make_shared<State>(State{boost::asio::steady_timer(ex), &socket, false})) {}
    ~ReadDeadline() { state_->timer.cancel(); }
    ReadDeadline(const ReadDeadline&) = delete;
    ReadDeadline& operator=(const ReadDeadline&) = delete;

    void arm(std::chrono::steady_clock::duration d) {
        state_->fired = false;
        state_->timer.expires_after(d);
        state_->timer.async_wait([weak = std::weak_ptr<State>(state_)](boost::system::error_code ec) {
            auto s = weak.lock();
            if (ec || !s) return;
            s->fired = true;
            s->socket->cancel();
        });
    }
    void disarm() { state_->timer.cancel(); }
    bool fired() const { return state_->fired; }

  private:
    struct State {
        boost::asio::steady_timer timer;
        boost::asio::ip::tcp::socket* socket;
        bool fired;
    };
    std::shared_ptr<State> state_;
};

// Closes a keep-alive connection that stayed idle for `limit` by cancelling its read. Armed when the
// connection is first idle and re-armed only when it fires, never cancelled per request: a cancel posts
// the timer's handler, which is one more pass of the scheduler on every request. When it fires early (the
// connection was busy, or idle for less than `limit`), it waits again for what is left.
class IdleDeadline {
  public:
    IdleDeadline(boost::asio::any_io_executor ex, boost::asio::ip::tcp::socket& socket,
                 std::chrono::steady_clock::duration limit)
        : state_(std::make_shared<State>(State{boost::asio::steady_timer(ex), &socket, limit})) {}
    ~IdleDeadline() { state_->timer.cancel(); }
    IdleDeadline(const IdleDeadline&) = delete;
    IdleDeadline& operator=(const IdleDeadline&) = delete;

    void idle() {
        state_->idle = true;
        state_->since = std::chrono::steady_clock::now();
        if (!state_->armed) arm(state_, state_->limit);
    }
    void busy() { state_->idle = false; }

  private:
    struct State {
        boost::asio::steady_timer timer;
        boost::asio::ip::tcp::socket* socket;
        std::chrono::steady_clock::duration limit;
        std::chrono::steady_clock::time_point since{};
        bool idle = false, armed = false;
    };
    static void arm(const std::shared_ptr<State>& s, std::chrono::steady_clock::duration d) {
        s->armed = true;
        s->timer.expires_after(d);
        s->timer.async_wait([weak = std::weak_ptr<State>(s)](boost::system::error_code ec) {
            auto st = weak.lock();
            if (ec || !st) return;
            st->armed = false;
            if (!st->idle) return;  // busy: idle() arms it again
            const auto left = st->since + st->limit - std::chrono::steady_clock::now();
            if (left > std::chrono::steady_clock::duration::zero()) {
                arm(st, left);
            } else {
                boost::system::error_code ignored;
                st->socket->cancel(ignored);
            }
        });
    }
    std::shared_ptr<State> state_;
};

}  // namespace loch::http
