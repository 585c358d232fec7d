// http/connection — a client connection's early next read.
#include "http/connection.hpp"

#include <boost/asio/async_result.hpp>

#include "http/relays.hpp"
#include "http/server_options.hpp"

namespace loch::http {

namespace asio = boost::asio;
using asio::ip::tcp;

// What one read of a client takes: a whole usual request.
constexpr std::size_t kClientRead = 8 * 1024;

bool Connection::start_next_read(const std::shared_ptr<RelayState>& relay) {
    if (state_->pending || buffer_->size() > 0) return false;
    state_->pending = true;
    state_->completed = false;
    state_->relay = relay;
    socket_->async_read_some(buffer_->prepare(kClientRead), [st = state_](boost::system::error_code ec,
                                                                          std::size_t n) {
        st->completed = true;
        st->ec = ec;
        st->n = n;
        // EOF or a broken connection while the relay runs: the client is gone. Bytes: a
        // pipelined request, read after this response.
        if (const auto r = st->relay.lock(); r && !r->done && ec && ec != asio::error::operation_aborted) {
            r->client_gone = true;
            r->close_upstream();
        }
        if (st->waiter) {
            auto resume = std::move(*st->waiter);
            st->waiter.reset();
            std::move(resume)(ec);
        }
    });
    return true;
}

asio::awaitable<boost::system::error_code> Connection::next_read() {
    if (!state_->pending) {
        auto [ec, n] = co_await socket_->async_read_some(buffer_->prepare(kClientRead), tok);
        if (!ec) buffer_->commit(n);
        co_return ec;
    }
    if (!state_->completed) {
        co_await asio::async_initiate<decltype(tok), void(boost::system::error_code)>(
            [st = state_](auto handler) { st->waiter.emplace(std::move(handler)); }, tok);
    }
    const auto st = state_;
    st->pending = st->completed = false;
    st->relay.reset();
    if (!st->ec) buffer_->commit(st->n);
    co_return st->ec;
}

}  // namespace loch::http
