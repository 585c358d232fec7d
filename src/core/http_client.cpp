// core/http_client — one exchange (http_client.hpp says what it promises).
#include "core/http_client.hpp"

#include <algorithm>
#include <array>
#include <cctype>

#include <boost/asio/as_tuple.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <boost/beast/core/flat_buffer.hpp>
#include <boost/beast/core/string.hpp>
#include <boost/beast/core/tcp_stream.hpp>
#include <boost/beast/http/buffer_body.hpp>
#include <boost/beast/http/read.hpp>
#include <boost/beast/http/string_body.hpp>
#include <boost/beast/http/write.hpp>

#include "core/http_connect.hpp"
#include "core/text.hpp"

namespace loch::core {

namespace asio = boost::asio;
namespace beast = boost::beast;
namespace bhttp = beast::http;

namespace {

// Connects and sends `call`; false (with reply.error, or status 200 for connect_only) when nothing more is to
// be read.
asio::awaitable<bool> send(beast::tcp_stream& stream, const HttpTarget& to, HttpCall& call,
                           HttpReply& reply) {
    const auto tok = asio::as_tuple(asio::use_awaitable);
    boost::system::error_code ec;
    const auto addr = asio::ip::make_address(to.host, ec);
    if (ec) {
        reply.error = "bad address '" + to.host + "'";
        co_return false;
    }
    const std::string where = to.host + ":" + std::to_string(to.port);
    const auto started = std::chrono::steady_clock::now();
    const auto cec = co_await http_connect(stream, asio::ip::tcp::endpoint(addr, to.port), call.timeout);
    // (The deadline covers the whole exchange: what the connect took is gone from it.)
    stream.expires_at(started + call.timeout);
    if (cec) {
        reply.error = "connect " + where + ": " + cec.message();
        co_return false;
    }
    if (call.connect_only) {
        stream.socket().shutdown(asio::ip::tcp::socket::shutdown_both, ec);
        reply.status = 200;
        co_return false;
    }
    bhttp::request<bhttp::string_body> req{bhttp::string_to_verb(call.method), call.target, 11};
    req.set(bhttp::field::host, where);
    req.set(bhttp::field::user_agent, "loch");
    req.keep_alive(false);
    bool typed = false;
    for (const auto& [name, value] : call.headers) {
        req.set(name, value);
        typed |= beast::iequals(name, "content-type");
    }
    if (!call.body.empty() && !typed) req.set(bhttp::field::content_type, "application/json");
    req.body() = std::move(call.body);
    req.prepare_payload();
    auto [wec, wn] = co_await bhttp::async_write(stream, req, tok);
    if (wec) {
        reply.error = "write to " + where + ": " + wec.message();
        co_return false;
    }
    co_return true;
}

template <class Body>
void take_header(const bhttp::response<Body>& res, HttpReply& reply) {
    reply.status = static_cast<int>(res.result_int());
    for (const auto& f : res) reply.fields[ascii_lower(f.name_string())] = std::string(f.value());
}

}  // namespace

asio::awaitable<HttpReply> http_exchange(asio::any_io_executor ex, HttpTarget to, HttpCall call) {
    HttpReply reply;
    beast::tcp_stream stream(ex);
    if (!co_await send(stream, to, call, reply)) co_return reply;
    beast::flat_buffer buf;
    bhttp::response_parser<bhttp::string_body> parser;
    parser.body_limit(call.body_limit);
    auto [rec, rn] = co_await bhttp::async_read(stream, buf, parser, asio::as_tuple(asio::use_awaitable));
    if (rec) {
        reply.error = "read from " + to.host + ":" + std::to_string(to.port) + ": " + rec.message();
        co_return reply;
    }
    take_header(parser.get(), reply);
    reply.body = std::move(parser.get().body());
    boost::system::error_code ec;
    stream.socket().shutdown(asio::ip::tcp::socket::shutdown_both, ec);
    co_return reply;
}

asio::awaitable<HttpReply> http_stream(asio::any_io_executor ex, HttpTarget to, HttpCall call,
                                       std::function<void(std::string_view)> on_data) {
    const auto tok = asio::as_tuple(asio::use_awaitable);
    HttpReply reply;
    beast::tcp_stream stream(ex);
    if (!co_await send(stream, to, call, reply)) co_return reply;
    const std::string where = to.host + ":" + std::to_string(to.port);
    beast::flat_buffer buf;
    bhttp::response_parser<bhttp::buffer_body> parser;
    parser.body_limit(boost::none);
    auto [hec, hn] = co_await bhttp::async_read_header(stream, buf, parser, tok);
    if (hec) {
        reply.error = "read from " + where + ": " + hec.message();
        co_return reply;
    }
    take_header(parser.get(), reply);
    if (reply.status >= 400) {
        bhttp::response_parser<bhttp::string_body> rest(std::move(parser));
        rest.body_limit(call.body_limit);
        co_await bhttp::async_read(stream, buf, rest, tok);  // what came of it, if it broke off
        reply.body = std::move(rest.get().body());
        co_return reply;
    }
    stream.expires_never();
    std::array<char, 8192> piece;
    while (!parser.is_done()) {
        parser.get().body().data = piece.data();
        parser.get().body().size = piece.size();
        auto [rec, rn] = co_await bhttp::async_read_some(stream, buf, parser, tok);
        if (rec == bhttp::error::need_buffer) rec = {};
        if (rec) break;  // the server ended it (or went away): what came was handed on
        on_data(std::string_view(piece.data(), piece.size() - parser.get().body().size));
    }
    co_return reply;
}

}  // namespace loch::core
