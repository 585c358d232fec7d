#include "http/server.hpp"

#include <charconv>

#include <spdlog/spdlog.h>
#include <boost/asio/as_tuple.hpp>
#include <boost/asio/co_spawn.hpp>
#include <boost/asio/detached.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <boost/beast/http.hpp>

#include "http/errors.hpp"
#include "http/router.hpp"

namespace loch::http {

namespace asio = boost::asio;
namespace beast = boost::beast;
namespace bhttp = beast::http;
using asio::ip::tcp;
using broker::Error;
using broker::ErrorKind;

namespace {
constexpr auto tok = asio::as_tuple(asio::use_awaitable);
}

std::string dump(const nlohmann::json& j) {
    return j.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
}

asio::awaitable<void> write_json(beast::tcp_stream& stream, unsigned version, bool keep_alive,
                                 unsigned status, const nlohmann::json& body,
                                 std::optional<int> retry_after_s, const std::string& allow) {
    bhttp::response<bhttp::string_body> res{static_cast<bhttp::status>(status), version};
    res.set(bhttp::field::server, "loch");
    res.set(bhttp::field::content_type, "application/json");
    if (retry_after_s) res.set(bhttp::field::retry_after, std::to_string(*retry_after_s));
    if (!allow.empty()) res.set(bhttp::field::allow, allow);
    res.keep_alive(keep_alive);
    res.body() = dump(body);
    res.prepare_payload();
    stream.expires_after(std::chrono::seconds(30));
    co_await bhttp::async_write(stream, res, tok);
    stream.expires_never();
}

asio::awaitable<void> write_error(beast::tcp_stream& stream, unsigned version, bool keep_alive,
                                  const Error& e, const std::string& allow) {
    co_await write_json(stream, version, keep_alive, static_cast<unsigned>(status_of(e.kind())),
                        error_body(e), e.retry_after_s(), allow);
}

Server::Server(asio::any_io_executor ex, broker::Broker& broker, ServerOptions options)
    : ex_(ex),
      broker_(broker),
      options_(std::move(options)),
      acceptor_(ex),
      alive_(std::make_shared<bool>(true)) {}

Server::~Server() {
    *alive_ = false;
}

std::uint16_t Server::listen() {
    boost::system::error_code ec;
    const auto addr = asio::ip::make_address(options_.listen, ec);
    if (ec) throw std::runtime_error("listen address '" + options_.listen + "' is not an IP address");
    const tcp::endpoint ep(addr, options_.port);
    acceptor_.open(ep.protocol());
    acceptor_.set_option(asio::socket_base::reuse_address(true));
    acceptor_.bind(ep, ec);
    if (ec)
        throw std::runtime_error("cannot listen on " + options_.listen + ":" + std::to_string(options_.port) +
                                 ": " + ec.message());
    acceptor_.listen(asio::socket_base::max_listen_connections);
    port_ = acceptor_.local_endpoint().port();
    return port_;
}

void Server::start() {
    asio::co_spawn(ex_, accept_loop(), asio::detached);
}

void Server::stop() {
    boost::system::error_code ec;
    acceptor_.close(ec);
}

asio::awaitable<void> Server::accept_loop() {
    auto alive = alive_;
    while (*alive && acceptor_.is_open()) {
        auto [ec, sock] = co_await acceptor_.async_accept(tok);
        if (!*alive) co_return;
        if (ec) {
            if (ec == asio::error::operation_aborted || !acceptor_.is_open()) co_return;
            spdlog::warn("accept: {}", ec.message());
            continue;
        }
        sock.set_option(tcp::no_delay(true), ec);
        asio::co_spawn(ex_, session(std::move(sock)), asio::detached);
    }
}

asio::awaitable<void> Server::session(tcp::socket socket) {
    beast::tcp_stream stream(std::move(socket));
    beast::flat_buffer buffer;
    for (;;) {
        bhttp::request_parser<bhttp::string_body> parser;
        parser.body_limit(options_.max_body_bytes);
        parser.header_limit(64 * 1024);
        stream.expires_after(options_.idle_timeout);
        auto [ec, n] = co_await bhttp::async_read(stream, buffer, parser, tok);
        if (ec == bhttp::error::end_of_stream || ec == asio::error::eof || ec == beast::error::timeout ||
            ec == asio::error::connection_reset || ec == asio::error::operation_aborted)
            break;
        if (ec == bhttp::error::body_limit) {
            // (Not parser.content_length(): Beast reports the limit before it marks the header done.)
            nlohmann::json d = {{"limit_bytes", options_.max_body_bytes}};
            if (auto cl = parser.get().find(bhttp::field::content_length); cl != parser.get().end())
                if (std::uint64_t n = 0;
                    std::from_chars(cl->value().data(), cl->value().data() + cl->value().size(), n).ec ==
                    std::errc())
                    d["content_length"] = n;
            co_await write_error(stream, 11, false,
                                 Error(ErrorKind::request_too_large,
                                       "the request body is larger than max_body_bytes (" +
                                           std::to_string(options_.max_body_bytes) + " bytes)",
                                       d));
            // Read (and drop) what the client is still sending for a moment: closing with unread data would
            // reset the connection, and the client could lose the 413 before reading it.
            beast::error_code sec;
            stream.socket().shutdown(tcp::socket::shutdown_send, sec);
            char sink[16 * 1024];
            for (std::uint64_t drained = 0; drained < 64ull * 1024 * 1024;) {
                stream.expires_after(std::chrono::seconds(2));
                auto [dec, dn] = co_await stream.async_read_some(asio::buffer(sink), tok);
                if (dec) break;
                drained += dn;
            }
            co_return;
        }
        if (ec) {
            co_await write_error(
                stream, 11, false,
                Error(ErrorKind::invalid_request, "malformed HTTP request: " + ec.message()));
            break;
        }
        stream.expires_never();
        Request req = parser.release();
        const bool keep = co_await handle(stream, req);
        if (!keep || !req.keep_alive()) break;
    }
    beast::error_code ignored;
    stream.socket().shutdown(tcp::socket::shutdown_send, ignored);
}

asio::awaitable<bool> Server::handle(beast::tcp_stream& stream, Request& req) {
    const unsigned v = req.version();
    const bool keep = req.keep_alive();
    std::optional<Error> err;
    std::string allow;
    try {
        const Route r = route(req.method_string(), req.target());
        if (r.kind != Route::Kind::health && !authorized(req[bhttp::field::authorization], options_.api_keys))
            throw Error(ErrorKind::unauthorized,
                        "missing or wrong API key: send 'Authorization: Bearer <key>'");
        switch (r.kind) {
            // (Named bodies: g++ 12 miscompiles braced initializers inside co_await expressions.)
            case Route::Kind::health: {
                const nlohmann::json body = nlohmann::json::object({{"status", "ok"}});
                co_await write_json(stream, v, keep, 200, body);
                co_return keep;
            }
            case Route::Kind::models: {
                const nlohmann::json body = co_await broker_.models();
                co_await write_json(stream, v, keep, 200, body);
                co_return keep;
            }
            case Route::Kind::status: {
                const nlohmann::json body = co_await broker_.status();
                co_await write_json(stream, v, keep, 200, body);
                co_return keep;
            }
            case Route::Kind::plan: {
                auto body = nlohmann::json::parse(req.body(), nullptr, false);
                if (body.is_discarded() || !body.is_object() || !body.contains("model") ||
                    !body["model"].is_string())
                    throw Error(ErrorKind::invalid_request,
                                "POST /loch/plan needs a JSON body {\"model\": \"<name>\"}");
                const nlohmann::json answer = co_await broker_.plan(body["model"].get<std::string>());
                co_await write_json(stream, v, keep, 200, answer);
                co_return keep;
            }
            case Route::Kind::engine_log: {
                auto lines = co_await broker_.log_tail(r.engine, r.lines);
                if (!lines)
                    throw Error(ErrorKind::model_not_found, "no model named '" + r.engine + "'",
                                {{"model", r.engine}});
                nlohmann::json answer = nlohmann::json::object();
                answer["model"] = r.engine;
                answer["lines"] = *lines;
                co_await write_json(stream, v, keep, 200, answer);
                co_return keep;
            }
            case Route::Kind::openai:
                co_return co_await proxy(stream, req, r.endpoint);
            case Route::Kind::method_not_allowed:
                allow = r.allow;
                throw Error(ErrorKind::method_not_allowed,
                            std::string(req.method_string()) + " is not allowed on " +
                                std::string(req.target()) + "; use " + r.allow,
                            {{"allow", r.allow}});
            case Route::Kind::not_found:
                throw Error(ErrorKind::not_found, "no such endpoint: " + std::string(req.method_string()) +
                                                      " " + std::string(req.target()));
        }
    } catch (const Error& e) {
        err = e;
    } catch (const std::exception& e) {
        err = Error(ErrorKind::internal, std::string("internal error: ") + e.what());
    }
    co_await write_error(stream, v, keep, *err, allow);
    co_return keep;
}

}  // namespace loch::http
