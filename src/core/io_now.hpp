// core/io_now — reads and writes on the request path that finish without a trip through the scheduler
// when they can (issue 9).
//
// An Asio operation that completes at once — a write the socket takes whole, a read of bytes that are
// already buffered — still posts its completion, and each post is one more pass of the scheduler (an
// epoll_wait with a zero timeout and a handler dispatch). On loch's request path that was 8 passes per
// proxied request where 3 are needed. These helpers do the immediate part synchronously on a
// non-blocking socket and fall back to the asynchronous operation, with its timeout, only for what must
// wait: a full socket buffer, bytes not yet arrived. Behaviour is the same as the plain Beast/Asio calls.
//
// Every socket passed here is switched to non-blocking mode (asio's asynchronous operations work the same
// in either mode; only its synchronous ones change, and loch makes none that could block on these).
#pragma once

#include <chrono>
#include <cstddef>
#include <optional>

#include <boost/asio/as_tuple.hpp>
#include <boost/asio/awaitable.hpp>
#include <boost/asio/error.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <boost/asio/write.hpp>
#include <boost/beast/core/buffers_suffix.hpp>
#include <boost/beast/core/flat_buffer.hpp>
#include <boost/beast/core/tcp_stream.hpp>
#include <boost/beast/http/empty_body.hpp>
#include <boost/beast/http/error.hpp>
#include <boost/beast/http/parser.hpp>
#include <boost/beast/http/read.hpp>
#include <boost/beast/http/serializer.hpp>
#include <boost/beast/http/write.hpp>

namespace loch::core::io_now {

inline bool would_block(const boost::system::error_code& ec) {
    return ec == boost::asio::error::would_block || ec == boost::asio::error::try_again;
}

inline void make_non_blocking(boost::beast::tcp_stream& s) {
    if (!s.socket().non_blocking()) {
        boost::system::error_code ignored;
        s.socket().non_blocking(true, ignored);
    }
}

// Writes `buffers` whole: what the socket takes now, then the rest asynchronously within `timeout`.
template <class ConstBufferSequence>
boost::asio::awaitable<boost::system::error_code> write(boost::beast::tcp_stream& s,
                                                        const ConstBufferSequence& buffers,
                                                        std::chrono::steady_clock::duration timeout) {
    make_non_blocking(s);
    boost::system::error_code ec;
    const std::size_t n = boost::asio::write(s.socket(), buffers, ec);
    if (!would_block(ec)) co_return ec;
    boost::beast::buffers_suffix<ConstBufferSequence> rest(buffers);
    rest.consume(n);
    s.expires_after(timeout);
    auto [aec, an] =
        co_await boost::asio::async_write(s, rest, boost::asio::as_tuple(boost::asio::use_awaitable));
    s.expires_never();
    co_return aec;
}

// Writes an HTTP message whole (head and body), the same way.
template <bool isRequest, class Body, class Fields>
boost::asio::awaitable<boost::system::error_code> write_message(
    boost::beast::tcp_stream& s, const boost::beast::http::message<isRequest, Body, Fields>& m,
    std::chrono::steady_clock::duration timeout) {
    make_non_blocking(s);
    boost::beast::http::serializer<isRequest, Body, Fields> sr{m};
    boost::system::error_code ec;
    boost::beast::http::write(s.socket(), sr, ec);
    if (!would_block(ec)) co_return ec;
    s.expires_after(timeout);
    auto [aec, an] =
        co_await boost::beast::http::async_write(s, sr, boost::asio::as_tuple(boost::asio::use_awaitable));
    s.expires_never();
    co_return aec;
}

// Writes the head of a message whose body follows separately (a stream, a relayed answer).
template <bool isRequest, class Fields>
boost::asio::awaitable<boost::system::error_code> write_header(
    boost::beast::tcp_stream& s,
    const boost::beast::http::message<isRequest, boost::beast::http::empty_body, Fields>& m,
    std::chrono::steady_clock::duration timeout) {
    make_non_blocking(s);
    boost::beast::http::serializer<isRequest, boost::beast::http::empty_body, Fields> sr{m};
    boost::system::error_code ec;
    boost::beast::http::write_header(s.socket(), sr, ec);
    if (!would_block(ec)) co_return ec;
    s.expires_after(timeout);
    auto [aec, an] = co_await boost::beast::http::async_write_header(
        s, sr, boost::asio::as_tuple(boost::asio::use_awaitable));
    s.expires_never();
    co_return aec;
}

// Feeds `parser` what `buffer` holds, as far as it goes (header and body). Returns true when the message is
// complete; `ec` is set only for a real parse error (too large, malformed), not for "needs more bytes".
template <bool isRequest>
bool parse_buffered(boost::beast::http::basic_parser<isRequest>& parser, boost::beast::flat_buffer& buffer,
                    boost::system::error_code& ec) {
    parser.eager(true);
    while (buffer.size() > 0 && !parser.is_done()) {
        const std::size_t used = parser.put(buffer.data(), ec);
        buffer.consume(used);
        if (ec == boost::beast::http::error::need_more) {
            ec = {};
            return false;
        }
        if (ec || used == 0) return false;
    }
    return parser.is_done();
}

// The upstream side's reads, on the plain socket and without a timer of their own (a Beast stream timeout
// arms and cancels a timer per read: a timer-queue insert and a posted cancellation each time). Silence is
// the caller's to bound: a relay's stream watchdog cancels the socket, and a non-streamed answer has the
// engine's health watch (engines/engine). End of stream before a message: http::error::end_of_stream; in one:
// what put_eof() says (the end of a body delimited by the close, else partial_message).
constexpr std::size_t kReadSize = 16 * 1024;

template <bool isRequest>
boost::system::error_code on_eof(boost::beast::http::basic_parser<isRequest>& parser) {
    boost::system::error_code ec;
    if (!parser.got_some()) return boost::beast::http::error::end_of_stream;
    parser.put_eof(ec);
    return ec;
}

// Feeds `parser` what `buffer` holds and reads more until `enough(ec)` (ec: what the last put() said) gives
// the result to return.
template <bool isRequest, class Enough>
boost::asio::awaitable<boost::system::error_code> feed_until(
    boost::asio::ip::tcp::socket& s, boost::beast::flat_buffer& buffer,
    boost::beast::http::basic_parser<isRequest>& parser, Enough enough) {
    for (;;) {
        if (buffer.size() > 0) {
            boost::system::error_code ec;
            buffer.consume(parser.put(buffer.data(), ec));
            if (const std::optional<boost::system::error_code> done = enough(ec)) co_return *done;
        }
        auto [rec, n] = co_await s.async_read_some(buffer.prepare(kReadSize),
                                                   boost::asio::as_tuple(boost::asio::use_awaitable));
        if (rec == boost::asio::error::eof) co_return on_eof(parser);
        if (rec) co_return rec;
        buffer.commit(n);
    }
}

// Reads until the message's head is parsed (what follows it in the same reads stays in `buffer`).
template <bool isRequest>
boost::asio::awaitable<boost::system::error_code> read_header(
    boost::asio::ip::tcp::socket& s, boost::beast::flat_buffer& buffer,
    boost::beast::http::basic_parser<isRequest>& parser) {
    return feed_until(s, buffer, parser,
                      [&parser](boost::system::error_code ec) -> std::optional<boost::system::error_code> {
                          if (ec && ec != boost::beast::http::error::need_more) return ec;
                          if (parser.is_header_done()) return boost::system::error_code{};
                          return std::nullopt;
                      });
}

// Beast's read_some (parse what is buffered, else read until the parser makes progress) on the plain socket.
// need_buffer (the caller's body buffer is full) is not an error.
template <bool isRequest>
boost::asio::awaitable<boost::system::error_code> read_some(
    boost::asio::ip::tcp::socket& s, boost::beast::flat_buffer& buffer,
    boost::beast::http::basic_parser<isRequest>& parser) {
    return feed_until(s, buffer, parser,
                      [](boost::system::error_code ec) -> std::optional<boost::system::error_code> {
                          namespace bhttp = boost::beast::http;
                          if (ec == bhttp::error::need_more) return std::nullopt;
                          return ec == bhttp::error::need_buffer ? boost::system::error_code{} : ec;
                      });
}

}  // namespace loch::core::io_now
