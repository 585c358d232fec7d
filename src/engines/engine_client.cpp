#include "engines/engine_client.hpp"

#include <boost/asio/as_tuple.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>

namespace loch::engines {

namespace asio = boost::asio;
namespace beast = boost::beast;
namespace bhttp = beast::http;

asio::awaitable<EngineReply> engine_request(asio::any_io_executor ex, EngineAddress to, std::string method,
                                            std::string target, std::string body,
                                            std::chrono::milliseconds timeout) {
    const std::string& host = to.host;
    const std::uint16_t port = to.port;
    EngineReply reply;
    auto tok = asio::as_tuple(asio::use_awaitable);
    beast::tcp_stream stream(ex);
    boost::system::error_code ec;
    auto addr = asio::ip::make_address(host, ec);
    if (ec) {
        reply.error = "bad engine address '" + host + "'";
        co_return reply;
    }
    stream.expires_after(timeout);
    auto [cec] = co_await stream.async_connect(asio::ip::tcp::endpoint(addr, port), tok);
    if (cec) {
        reply.error = "connect " + host + ":" + std::to_string(port) + ": " + cec.message();
        co_return reply;
    }
    bhttp::request<bhttp::string_body> req{bhttp::string_to_verb(method), target, 11};
    req.set(bhttp::field::host, host + ":" + std::to_string(port));
    req.set(bhttp::field::connection, "close");
    if (!to.api_key.empty()) req.set(bhttp::field::authorization, "Bearer " + to.api_key);
    if (!body.empty()) req.set(bhttp::field::content_type, "application/json");
    req.body() = std::move(body);
    req.prepare_payload();
    auto [wec, wn] = co_await bhttp::async_write(stream, req, tok);
    if (wec) {
        reply.error = "write: " + wec.message();
        co_return reply;
    }
    beast::flat_buffer buf;
    bhttp::response_parser<bhttp::string_body> parser;
    parser.body_limit(64 * 1024 * 1024);
    auto [rec, rn] = co_await bhttp::async_read(stream, buf, parser, tok);
    if (rec) {
        reply.error = "read: " + rec.message();
        co_return reply;
    }
    reply.status = static_cast<int>(parser.get().result_int());
    reply.body = std::move(parser.get().body());
    beast::error_code ignored;
    stream.socket().shutdown(asio::ip::tcp::socket::shutdown_both, ignored);
    co_return reply;
}

}  // namespace loch::engines
