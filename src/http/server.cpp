#include "http/server.hpp"
#include "http/listener.hpp"

#include <algorithm>
#include <cerrno>
#include <charconv>
#include <random>

#include <fmt/format.h>

#include <spdlog/spdlog.h>
#include <boost/asio/as_tuple.hpp>
#include <boost/asio/co_spawn.hpp>
#include <boost/asio/detached.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <boost/beast/http.hpp>

#include "batch/runner.hpp"
#include "batch/store.hpp"
#include "core/io_now.hpp"
#include "http/admin_api.hpp"
#include "http/anthropic_shape.hpp"
#include "http/deadlines.hpp"
#include "http/errors.hpp"
#include "http/listener.hpp"
#include "http/ollama.hpp"
#include "http/ollama_api.hpp"
#include "http/router.hpp"
#include "http/routes.hpp"

namespace loch::http {

namespace asio = boost::asio;
namespace beast = boost::beast;
namespace bhttp = beast::http;
using asio::ip::tcp;
using broker::Error;
using broker::ErrorKind;

Server::Server(asio::any_io_executor ex, broker::Broker& broker, ServerOptions options)
    : ex_(ex),
      broker_(broker),
      options_(std::move(options)),
      acceptor_(ex),
      journal_(ex, broker, metrics_, options_.request_log, options_.request_log_flush),
      relays_(broker),
      loop_lag_(
          ex, [this] { return describe_activity(); }, [this](double s) { metrics_.observe_loop_lag(s); },
          observe::LoopLag::Options{}, [this] { return !sessions_.empty() || !relays_.empty(); }),
      responses_(options_),
      proxy_(ex, broker, pool_, journal_, options_, relays_, responses_),
      dashboard_(ex, broker.view(), relays_, shutting_down_),
      admin_(broker, metrics_,
             {.in_flight = [this] { return relays_.in_flight(); },
              .batches = [this] { return batches(); },
              .event_loop = [this] { return loop_lag_.json(); },
              .connections = [this] { return connection_figures(); },
              .upstream =
                  [this] {
                      return nlohmann::json{{"idle", pool_.idle_count()},
                                            {"connects", pool_.connects()},
                                            {"reuses", pool_.reuses()}};
                  },
              .cancel = [this](const std::string& id) { return relays_.cancel(id); }}),
      batch_api_(ex, broker, journal_, options_,
                 {.port = [this] { return port_; },
                  .preempt = [this](const std::string& id) { return relays_.preempt(id); },
                  .cancel = [this](const std::string& id) { relays_.cancel(id); }}),
      alive_(std::make_shared<bool>(true)) {
    // An engine about to stop loses its idle keep-alive connections first (core/http_pool.hpp: drop).
    broker_.listeners().engine_stopping = [this](const engines::EngineAddress& a) {
        pool_.drop(core::pool_key(a.port, a.api_key));
    };
}

Server::~Server() {
    *alive_ = false;
    broker_.listeners().engine_stopping = nullptr;
}

std::uint16_t Server::listen() {
    port_ = listen_on(acceptor_, options_.listen, options_.port, "the API");
    return port_;
}

void Server::start() {
    asio::co_spawn(ex_, accept_loop(), asio::detached);
    batch_api_.start();
    loop_lag_.start();
}

std::string Server::describe_activity() const {
    const auto busy =
        std::count_if(sessions_.begin(), sessions_.end(), [](const Session& s) { return s.busy; });
    return fmt::format("{} connection(s), {} with a request; {} relay(s) to engines; {} request(s) so far",
                       sessions_.size(), busy, relays_.size(), journal_.ids_given());
}

nlohmann::json Server::connection_figures() const {
    const auto busy =
        std::count_if(sessions_.begin(), sessions_.end(), [](const Session& s) { return s.busy; });
    return {{"open", sessions_.size()},
            {"busy", busy},
            {"max", options_.max_connections},
            {"idle_closed_at_cap", shed_connections_}};
}

void Server::stop() {
    loop_lag_.stop();
    boost::system::error_code ec;
    acceptor_.close(ec);
    pool_.close();  // idle engine connections: nothing new will use them
}

asio::awaitable<void> Server::accept_loop() {
    auto alive = alive_;
    asio::steady_timer backoff(ex_);
    auto last_fd_warning = std::chrono::steady_clock::time_point{};
    std::uint64_t fd_refusals = 0;
    while (*alive && acceptor_.is_open()) {
        auto [ec, sock] = co_await acceptor_.async_accept(tok);
        if (!*alive) co_return;
        if (ec) {
            if (ec == asio::error::operation_aborted || !acceptor_.is_open()) co_return;
            if (ec == asio::error::no_descriptors || ec.value() == ENFILE) {
                // Out of descriptors: retrying at once spins and floods the log. Wait for sessions to end,
                // and say so once per interval with the count.
                ++fd_refusals;
                shed_longest_idle(nullptr);  // an idle keep-alive connection gives its descriptor back
                const auto now = std::chrono::steady_clock::now();
                if (now - last_fd_warning >= std::chrono::seconds(10)) {
                    spdlog::warn(
                        "accept: {} ({} connection(s) open; {} accept(s) deferred since the last "
                        "warning); backing off",
                        ec.message(), sessions_.size(), fd_refusals);
                    last_fd_warning = now;
                    fd_refusals = 0;
                }
                backoff.expires_after(std::chrono::milliseconds(50));
                co_await backoff.async_wait(tok);
                continue;
            }
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
    Registration<Session> reg(sessions_, Session{&stream, false, std::chrono::steady_clock::now()});
    loop_lag_.wake_up();  // (an idle loch probes its loop every 10 s; a connection brings back 100 ms)
    ReadDeadline deadline(ex_, stream.socket());
    IdleDeadline idle(ex_, stream.socket(), options_.idle_timeout);
    Connection conn(stream.socket(), buffer);
    const auto open_connections = [&] {
        return std::count_if(sessions_.begin(), sessions_.end(), [](const Session& s) { return !s.shed; });
    };
    if (!shutting_down_ && static_cast<std::size_t>(open_connections()) > options_.max_connections)
        shed_longest_idle(&*reg.it);
    if (static_cast<std::size_t>(open_connections()) > options_.max_connections || shutting_down_) {
        const Error e = shutting_down_
                            ? Error(ErrorKind::shutting_down, "loch is shutting down", {}, 5)
                            : Error(ErrorKind::too_many_connections,
                                    fmt::format("loch already has {} open connections, each with a request "
                                                "running (max_connections {}): none idle to close",
                                                sessions_.size() - 1, options_.max_connections),
                                    {{"open_connections", sessions_.size() - 1},
                                     {"max_connections", options_.max_connections}},
                                    1);
        journal_.log_unread(e);
        co_await write_error(stream, 11, false, e);
        beast::error_code ignored;
        stream.socket().shutdown(tcp::socket::shutdown_send, ignored);
        co_return;
    }
    for (bool first = true;; first = false) {
        reg.it->busy = false;
        reg.it->served = !first;
        reg.it->idle_since = std::chrono::steady_clock::now();
        if (shutting_down_ || reg.it->shed) break;
        // Idle: wait for the first bytes of the next request (a pipelined one may be buffered already; the
        // read may have been started by the last request's relay).
        if (buffer.size() == 0) {
            idle.idle();
            const auto ec = co_await conn.next_read();
            idle.busy();
            if (ec) break;  // idle timeout, client closed, or shutdown closing idle connections
        }
        reg.it->busy = true;
        bhttp::request_parser<bhttp::string_body> parser;
        // The largest body any route takes; each route's own limit is applied once its header is read.
        parser.body_limit(
            std::max({options_.max_body_bytes, options_.max_upload_bytes, options_.max_batch_file_bytes}));
        parser.header_limit(64 * 1024);
        // Over the limit of its route: the upload routes take up to the largest max_upload, a Batch API file
        // max_batch_file, others max_body.
        const auto route_limit = [&] {
            const auto target = parser.get().target();
            if (BatchApi::is_file_upload(parser.get())) return options_.max_batch_file_bytes;
            const ModelRoute* mr = find_model_route(target.substr(0, target.find('?')));
            return mr && mr->body == BodyKind::multipart
                       ? std::max(options_.max_body_bytes, options_.max_upload_bytes)
                       : options_.max_body_bytes;
        };
        // The usual request arrived whole in the read above: parsed here, without a pass of the scheduler.
        boost::system::error_code ec;
        bool over_limit = false;
        if (!core::io_now::parse_buffered(parser, buffer, ec) && !ec) {
            if (!parser.is_header_done()) {
                deadline.arm(options_.header_timeout);
                auto [hec, hn] = co_await bhttp::async_read_header(stream, buffer, parser, tok);
                ec = hec;
            }
            if (!ec && !parser.is_done()) {
                // Refused from its header when its declared length is over its route's limit; a chunked
                // body is held to it as it arrives.
                const auto length = parser.content_length();
                over_limit = length && *length > route_limit();
                parser.body_limit(route_limit());
            }
            if (!ec && !over_limit && !parser.is_done() && BatchApi::is_file_upload(parser.get())) {
                // A Batch API file goes to disk as it arrives (http/batch_api_files.cpp), never whole into
                // memory.
                deadline.arm(options_.body_timeout);
                const bool keep = co_await batch_api_.receive_upload(stream, buffer, parser);
                deadline.disarm();
                if (!keep) break;
                continue;
            }
            if (!ec && !over_limit && !parser.is_done()) {
                deadline.arm(options_.body_timeout);
                auto [bec, bn] = co_await bhttp::async_read(stream, buffer, parser, tok);
                ec = bec;
            }
        }
        const bool header_done = parser.is_header_done();
        deadline.disarm();
        if (deadline.fired() && !shutting_down_) {
            const auto limit = header_done ? options_.body_timeout : options_.header_timeout;
            const Error e(ErrorKind::request_timeout,
                          fmt::format("the request's {} did not arrive within {} s",
                                      header_done ? "body" : "header", limit.count()),
                          {{"timeout_s", limit.count()}, {"part", header_done ? "body" : "header"}});
            journal_.log_unread(e);
            co_await write_error(stream, 11, false, e);
            break;
        }
        if (ec == bhttp::error::end_of_stream || ec == asio::error::eof ||
            ec == asio::error::connection_reset || ec == asio::error::operation_aborted)
            break;
        if (ec == bhttp::error::body_limit || over_limit ||
            (!ec && parser.is_done() && parser.get().body().size() > route_limit())) {
            const std::uint64_t limit = route_limit();
            // (Not parser.content_length(): Beast reports the limit before it marks the header done.)
            nlohmann::json d = {{"limit_bytes", limit}};
            if (auto cl = parser.get().find(bhttp::field::content_length); cl != parser.get().end())
                if (std::uint64_t n = 0;
                    std::from_chars(cl->value().data(), cl->value().data() + cl->value().size(), n).ec ==
                    std::errc())
                    d["content_length"] = n;
            const Error e(
                ErrorKind::request_too_large,
                fmt::format("the request body is larger than {} ({} bytes){}",
                            BatchApi::is_file_upload(parser.get()) ? "max_batch_file"
                            : limit > options_.max_body_bytes      ? "the largest max_upload of the models"
                                                                   : "max_body",
                            limit,
                            BatchApi::is_file_upload(parser.get()) ? ": raise max_batch_file in loch.yaml"
                            : limit > options_.max_body_bytes
                                ? ""
                                : ": raise max_body in loch.yaml (uploads: the model's max_upload)"),
                d);
            journal_.log_unread(e);
            co_await write_error(stream, 11, false, e);
            co_await drain_before_close(stream);
            co_return;
        }
        if (ec) {
            const Error e(ErrorKind::invalid_request, "malformed HTTP request: " + ec.message());
            journal_.log_unread(e);
            co_await write_error(stream, 11, false, e);
            break;
        }
        Request req = parser.release();
        const bool keep = co_await handle(stream, req, conn);
        if (!keep || !req.keep_alive()) break;
    }
    beast::error_code ignored;
    stream.socket().shutdown(tcp::socket::shutdown_send, ignored);
}

namespace {
template <class Done>
asio::awaitable<void> wait_until(Done done, std::chrono::milliseconds limit) {
    asio::steady_timer t(co_await asio::this_coro::executor);
    const auto deadline = std::chrono::steady_clock::now() + limit;
    while (!done() && std::chrono::steady_clock::now() < deadline) {
        t.expires_after(std::chrono::milliseconds(20));
        co_await t.async_wait(tok);
    }
}
}  // namespace

bool Server::shed_longest_idle(const Session* except) {
    const auto now = std::chrono::steady_clock::now();
    const auto idle = [&](Session& s) {
        if (&s == except || s.busy || s.shed) return false;
        if (!s.served && now - s.idle_since < std::chrono::seconds(1)) return false;
        boost::system::error_code ec;
        return s.stream->socket().available(ec) == 0 && !ec;  // FIONREAD: never blocks
    };
    Session* oldest = nullptr;
    for (auto& s : sessions_)
        if (idle(s) && (!oldest || s.idle_since < oldest->idle_since)) oldest = &s;
    if (!oldest) return false;
    oldest->shed = true;
    oldest->stream->socket().cancel();  // its wait for a next request ends; the session closes the socket
    ++shed_connections_;
    return true;
}

void Server::close_idle() {
    for (auto& s : sessions_)
        if (!s.busy) s.stream->socket().cancel();
}

asio::awaitable<void> Server::drain(std::chrono::milliseconds grace) {
    stop();
    batch_api_.stop();  // no new batch item; the running ones end below and are requeued
    shutting_down_ = true;
    close_idle();
    const auto none_busy = [&] {
        return std::none_of(sessions_.begin(), sessions_.end(), [](const Session& s) { return s.busy; });
    };
    co_await wait_until(none_busy, grace);
    // What is still running gets an explicit end: the relay writes the error and finishes its response.
    const Error e(ErrorKind::shutting_down,
                  fmt::format("loch is shutting down; the request did not finish within the {} ms grace",
                              grace.count()),
                  {{"grace_ms", grace.count()}}, 5);
    relays_.abort_all(e);
}

asio::awaitable<void> Server::wait_closed() {
    co_await wait_until([&] { return relays_.empty(); }, std::chrono::milliseconds(5000));
    close_idle();
    co_await wait_until([&] { return sessions_.empty(); }, std::chrono::milliseconds(2000));
    journal_.flush();
}

// A request refused before it was read whole (timeout, too large, malformed, no room): its log line.
// Every request but the monitoring reads (health, status, metrics, the dashboard and its log stream: polled
// every second, they would drown the rest) gets its line in the request log; model requests write their
// own, with their figures (http/model_request.cpp).
asio::awaitable<bool> Server::handle(beast::tcp_stream& stream, Request& req, Connection& conn) {
    const auto started = std::chrono::steady_clock::now();
    const bool head = req.method() == bhttp::verb::head;
    const Route r =
        route(head ? std::string_view("GET") : std::string_view(req.method_string()), req.target());
    unsigned status = 200;
    std::string error_type;
    const bool keep = head ? co_await answer_head(stream, req, r, status, error_type)
                           : co_await dispatch(stream, req, r, status, error_type, conn);
    using K = Route::Kind;
    const bool model = r.kind == K::openai || r.kind == K::ollama_generation;
    const bool monitoring = r.kind == K::health || r.kind == K::status || r.kind == K::history ||
                            r.kind == K::metrics || r.kind == K::dashboard ||
                            (r.kind == K::engine_log && r.follow);
    if (!model && !monitoring) {
        observe::RequestRecord rec;
        rec.id = journal_.id_of(req);
        const std::string_view target = req.target();
        rec.route = std::string(req.method_string()) + " " + std::string(target.substr(0, target.find('?')));
        rec.model = r.engine;
        rec.status = status;
        rec.error_type = error_type;
        rec.duration_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count();
        journal_.log(std::move(rec));
    }
    co_return keep;
}

asio::awaitable<bool> Server::answer_head(beast::tcp_stream& stream, Request& req, const Route& r,
                                          unsigned& status, std::string& error_type) {
    using K = Route::Kind;
    Reply reply;
    std::string allow;
    try {
        if (r.kind != K::health && r.kind != K::dashboard &&
            !authorized(req[bhttp::field::authorization], options_.api_keys))
            throw Error(ErrorKind::unauthorized,
                        "missing or wrong API key: send 'Authorization: Bearer <key>'");
        switch (r.kind) {
            case K::dashboard:
                reply = Reply{200, {}, std::string(Dashboard::page_html()), "text/html; charset=utf-8"};
                break;
            case K::not_found:
                throw Error(ErrorKind::not_found, "no such endpoint: HEAD " + std::string(req.target()));
            case K::method_not_allowed:
                allow = r.allow;
                throw Error(ErrorKind::method_not_allowed,
                            "HEAD is not allowed on " + std::string(req.target()) + "; use " + r.allow,
                            {{"allow", r.allow}});
            case K::openai:
            case K::ollama_generation:
            case K::files:
            case K::batches:
            case K::stored_response:
                allow = "GET";
                throw Error(
                    ErrorKind::method_not_allowed,
                    "HEAD is answered on loch's own pages and reads, not on " + std::string(req.target()),
                    {{"allow", allow}});
            case K::engine_log:
                if (r.follow) {
                    allow = "GET";
                    throw Error(ErrorKind::method_not_allowed, "HEAD does not follow a log; use GET",
                                {{"allow", allow}});
                }
                [[fallthrough]];
            default:
                reply = co_await admin_.answer(req, r);
        }
    } catch (const Error& e) {
        reply = Reply{static_cast<unsigned>(status_of(e.kind())), error_body(e), std::nullopt, {}};
        error_type = broker::to_string(e.kind());
    } catch (const std::exception& e) {
        const Error err(ErrorKind::internal, std::string("internal error: ") + e.what());
        reply = Reply{static_cast<unsigned>(status_of(err.kind())), error_body(err), std::nullopt, {}};
        error_type = broker::to_string(err.kind());
    }
    status = reply.status;
    const std::size_t bytes = reply.text ? reply.text->size() : dump(reply.body).size();
    co_await write_head(stream, req.version(), req.keep_alive(), reply.status,
                        reply.text ? reply.content_type : "application/json", bytes, allow);
    co_return req.keep_alive();
}

asio::awaitable<bool> Server::dispatch(beast::tcp_stream& stream, Request& req, const Route& r,
                                       unsigned& status, std::string& error_type, Connection& conn) {
    const unsigned v = req.version();
    const bool keep = req.keep_alive();
    std::optional<Error> err;
    std::string allow;
    try {
        // The dashboard's page holds no data (it asks for a key when /loch/status says 401).
        if (r.kind != Route::Kind::health && r.kind != Route::Kind::dashboard &&
            !authorized(req[bhttp::field::authorization], options_.api_keys))
            throw Error(ErrorKind::unauthorized,
                        "missing or wrong API key: send 'Authorization: Bearer <key>'");
        switch (r.kind) {
            case Route::Kind::openai:
            case Route::Kind::ollama_generation:
                co_return co_await proxy_.model_request(stream, req, r, conn);
            case Route::Kind::files:
                co_return co_await batch_api_.files_route(stream, req, r);
            case Route::Kind::batches:
                co_return co_await batch_api_.batches_route(stream, req, r);
            case Route::Kind::stored_response:
                co_await write_json(stream, v, keep, 200, responses_.answer(req, r));
                co_return keep;
            case Route::Kind::dashboard:
                co_return co_await dashboard_.page(stream, req);
            case Route::Kind::engine_log:
                if (r.follow) co_return co_await dashboard_.follow_log(stream, req, r);
                break;
            case Route::Kind::method_not_allowed:
                allow = r.allow;
                throw Error(ErrorKind::method_not_allowed,
                            std::string(req.method_string()) + " is not allowed on " +
                                std::string(req.target()) + "; use " + r.allow,
                            {{"allow", r.allow}});
            case Route::Kind::not_found:
                throw Error(ErrorKind::not_found, "no such endpoint: " + std::string(req.method_string()) +
                                                      " " + std::string(req.target()));
            default:
                break;
        }
        const Reply reply = co_await admin_.answer(req, r);
        status = reply.status;
        if (reply.text)
            co_await write_text(stream, v, keep, reply.status, reply.content_type, *reply.text);
        else
            co_await write_json(stream, v, keep, reply.status, reply.body);
        co_return keep;
    } catch (const Error& e) {
        err = e;
    } catch (const std::exception& e) {
        err = Error(ErrorKind::internal, std::string("internal error: ") + e.what());
    }
    status = static_cast<unsigned>(status_of(err->kind()));
    error_type = broker::to_string(err->kind());
    // Ollama's namespace (/api/…) answers in Ollama's error shape: its clients read `error` as a string;
    // Anthropic's (/v1/messages…) in Anthropic's (http/anthropic_shape.hpp).
    const bool ollama = std::string_view(req.target()).starts_with("/api/");
    const bool anthropic = std::string_view(req.target()).starts_with("/v1/messages");
    if (ollama) {
        co_await write_json(stream, v, keep, status,
                            ollama_error_body(err->what(), error_type, err->details()), err->retry_after_s());
    } else if (anthropic) {
        status = anthropic_status(*err);
        co_await write_json(stream, v, keep, status, anthropic_error_body(*err), err->retry_after_s(), allow);
    } else {
        co_await write_error(stream, v, keep, *err, allow);
    }
    co_return keep;
}

}  // namespace loch::http
