// core/http_connect — how the HTTP client (core/http_client's exchange, core/http_pool's kept connections)
// opens a TCP connection to a server on this machine: within a deadline, with Nagle off (a request is one
// write, and its answer should not wait for an ACK), the stream's deadline cleared afterwards for the caller
// to set its own.
#pragma once

#include <chrono>

#include <boost/asio/as_tuple.hpp>
#include <boost/asio/awaitable.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <boost/beast/core/tcp_stream.hpp>

namespace loch::core {

inline boost::asio::awaitable<boost::system::error_code> http_connect(boost::beast::tcp_stream& stream,
                                                                      boost::asio::ip::tcp::endpoint to,
                                                                      std::chrono::milliseconds timeout) {
    stream.expires_after(timeout);
    auto [ec] = co_await stream.async_connect(to, boost::asio::as_tuple(boost::asio::use_awaitable));
    stream.expires_never();
    if (!ec) {
        boost::system::error_code ignored;
        stream.socket().set_option(boost::asio::ip::tcp::no_delay(true), ignored);
    }
    co_return ec;
}

}  // namespace loch::core
