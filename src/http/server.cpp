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
#include "http/errors.hpp"
#include "http/io_now.hpp"
#include "http/listener.hpp"
#include "http/ollama.hpp"
#include "http/ollama_api.hpp"
#include "http/router.hpp"
#include "http/routes.hpp"
#include "http/sdapi.hpp"

namespace loch::http {

namespace asio = boost::asio;
namespace beast = boost::beast;
namespace bhttp = beast::http;
using asio::ip::tcp;
using broker::Error;
using broker::ErrorKind;

namespace {

// A deadline for reading one request that cancels the read instead of closing the socket (what a Beast
// stream timeout does), so that the client can still be told 408. The timer's handler holds only a weak
// reference: a session that ended first is never touched.
class ReadDeadline {
  public:
    ReadDeadline(asio::any_io_executor ex, tcp::socket& socket)
        : state_(std::make_shared<State>(State{asio::steady_timer(ex), &socket, false})) {}
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
        asio::steady_timer timer;
        tcp::socket* socket;
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
    IdleDeadline(asio::any_io_executor ex, tcp::socket& socket, std::chrono::steady_clock::duration limit)
        : state_(std::make_shared<State>(State{asio::steady_timer(ex), &socket, limit})) {}
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
        asio::steady_timer timer;
        tcp::socket* socket;
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
}  // namespace

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
    // A refusal that the same request can never get past here (bad input, no such model, too large for
    // this box's hardware, a full disk): OpenAI's and Anthropic's SDKs would otherwise retry it. A model too
    // large for this box is a 503 all the same, which a load balancer retries on another box
    // (docs/several-boxes.md).
    const auto type = status == 503 && body.is_object() && body.contains("error") && body["error"].is_object()
                          ? body["error"].value("type", std::string())
                          : std::string();
    const bool too_large_here = type == "insufficient_memory" || type == "engine_missing";
    if (status == 400 || status == 401 || status == 404 || status == 405 || status == 409 || status == 413 ||
        status == 507 || too_large_here)
        res.set("x-should-retry", "false");
    res.keep_alive(keep_alive);
    res.body() = dump(body);
    res.prepare_payload();
    co_await io_now::write_message(stream, res, std::chrono::seconds(30));
}

asio::awaitable<void> write_text(beast::tcp_stream& stream, unsigned version, bool keep_alive,
                                 unsigned status, std::string_view content_type, std::string body) {
    bhttp::response<bhttp::string_body> res{static_cast<bhttp::status>(status), version};
    res.set(bhttp::field::server, "loch");
    res.set(bhttp::field::content_type, content_type);
    res.keep_alive(keep_alive);
    res.body() = std::move(body);
    res.prepare_payload();
    co_await io_now::write_message(stream, res, std::chrono::seconds(30));
}

asio::awaitable<void> write_error(beast::tcp_stream& stream, unsigned version, bool keep_alive,
                                  const Error& e, const std::string& allow) {
    co_await write_json(stream, version, keep_alive, static_cast<unsigned>(status_of(e.kind())),
                        error_body(e), e.retry_after_s(), allow);
}

asio::awaitable<void> drain_before_close(beast::tcp_stream& stream) {
    beast::error_code sec;
    stream.socket().shutdown(tcp::socket::shutdown_send, sec);
    char sink[16 * 1024];
    for (std::uint64_t drained = 0; drained < 64ull * 1024 * 1024;) {
        stream.expires_after(std::chrono::seconds(2));
        auto [dec, dn] =
            co_await stream.async_read_some(asio::buffer(sink), asio::as_tuple(asio::use_awaitable));
        if (dec) break;
        drained += dn;
    }
}

Server::Server(asio::any_io_executor ex, broker::Broker& broker, ServerOptions options)
    : ex_(ex),
      broker_(broker),
      options_(std::move(options)),
      acceptor_(ex),
      request_log_(options_.request_log),
      log_flush_(ex),
      loop_lag_(
          ex, [this] { return describe_activity(); }, [this](double s) { metrics_.observe_loop_lag(s); },
          observe::LoopLag::Options{}, [this] { return !sessions_.empty() || !relays_.empty(); }),
      alive_(std::make_shared<bool>(true)) {
    // Request ids unique across restarts: a random prefix per run, then a counter.
    id_prefix_ = fmt::format("{:06x}-", std::random_device{}() & 0xffffff);
    // An engine about to stop loses its idle keep-alive connections first (http/upstream_pool.hpp: drop).
    broker_.on_engine_stopping(
        [this](const engines::EngineAddress& a) { pool_.drop(upstream_key(a.port, a.api_key)); });
}

std::string Server::next_request_id() {
    char digits[24];
    const auto end = std::to_chars(digits, digits + sizeof digits, next_request_++).ptr;
    std::string id;
    id.reserve(id_prefix_.size() + static_cast<std::size_t>(end - digits));
    id.append(id_prefix_).append(digits, end);
    return id;
}

Server::~Server() {
    *alive_ = false;
    broker_.on_engine_stopping(nullptr);
}

std::uint16_t Server::listen() {
    port_ = listen_on(acceptor_, options_.listen, options_.port, "the API");
    return port_;
}

void Server::start() {
    asio::co_spawn(ex_, accept_loop(), asio::detached);
    start_batches();
    loop_lag_.start();
}

std::string Server::describe_activity() const {
    const auto busy =
        std::count_if(sessions_.begin(), sessions_.end(), [](const Session& s) { return s.busy; });
    return fmt::format("{} connection(s), {} with a request; {} relay(s) to engines; {} request(s) so far",
                       sessions_.size(), busy, relays_.size(), next_request_ - 1);
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
    loop_lag_.wake_up();  // (an idle loch probes its loop every 2 s; a connection brings back 100 ms)
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
        log_unread(e);
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
            if (is_file_upload(parser.get())) return options_.max_batch_file_bytes;
            const ModelRoute* mr = find_model_route(target.substr(0, target.find('?')));
            return mr && mr->body == BodyKind::multipart
                       ? std::max(options_.max_body_bytes, options_.max_upload_bytes)
                       : options_.max_body_bytes;
        };
        // The usual request arrived whole in the read above: parsed here, without a pass of the scheduler.
        boost::system::error_code ec;
        bool over_limit = false;
        if (!io_now::parse_buffered(parser, buffer, ec) && !ec) {
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
            if (!ec && !over_limit && !parser.is_done() && is_file_upload(parser.get())) {
                // A Batch API file goes to disk as it arrives (http/files.cpp), never whole into memory.
                deadline.arm(options_.body_timeout);
                const bool keep = co_await receive_upload(stream, buffer, parser);
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
            log_unread(e);
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
                            is_file_upload(parser.get())      ? "max_batch_file"
                            : limit > options_.max_body_bytes ? "the largest max_upload of the models"
                                                              : "max_body",
                            limit,
                            is_file_upload(parser.get()) ? ": raise max_batch_file in loch.yaml"
                            : limit > options_.max_body_bytes
                                ? ""
                                : ": raise max_body in loch.yaml (uploads: the model's max_upload)"),
                d);
            log_unread(e);
            co_await write_error(stream, 11, false, e);
            co_await drain_before_close(stream);
            co_return;
        }
        if (ec) {
            const Error e(ErrorKind::invalid_request, "malformed HTTP request: " + ec.message());
            log_unread(e);
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
    if (runner_) runner_->stop();  // no new batch item; the running ones end below and are requeued
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
    for (auto& w : relays_)
        if (auto st = w.lock(); st && !st->done) {
            st->abort = e;
            st->close_upstream();
        }
}

asio::awaitable<void> Server::wait_closed() {
    co_await wait_until([&] { return relays_.empty(); }, std::chrono::milliseconds(5000));
    close_idle();
    co_await wait_until([&] { return sessions_.empty(); }, std::chrono::milliseconds(2000));
    request_log_.flush();
}

// A request refused before it was read whole (timeout, too large, malformed, no room): its log line.
void Server::log_unread(const Error& e) {
    observe::RequestRecord rec;
    rec.id = next_request_id();
    rec.route = "-";
    rec.status = static_cast<unsigned>(status_of(e.kind()));
    rec.error_type = broker::to_string(e.kind());
    log_request(rec);
}

void Server::log_request(const observe::RequestRecord& rec) {
    if (!request_log_.write(rec) || log_flush_armed_) return;
    log_flush_armed_ = true;
    log_flush_.expires_after(options_.request_log_flush);
    log_flush_.async_wait([this, alive = std::weak_ptr<bool>(alive_)](boost::system::error_code) {
        if (auto a = alive.lock(); !a || !*a) return;
        log_flush_armed_ = false;
        request_log_.flush();
    });
}

// Every request but the monitoring reads (health, status, metrics, the dashboard and its log stream: polled
// every second, they would drown the rest) gets its line in the request log; model requests write their
// own, with their figures (http/model_request.cpp).
asio::awaitable<bool> Server::handle(beast::tcp_stream& stream, Request& req, Connection& conn) {
    const auto started = std::chrono::steady_clock::now();
    const Route r = route(req.method_string(), req.target());
    unsigned status = 200;
    std::string error_type;
    const bool keep = co_await dispatch(stream, req, r, status, error_type, conn);
    using K = Route::Kind;
    const bool model = r.kind == K::openai || r.kind == K::ollama_generation;
    const bool monitoring = r.kind == K::health || r.kind == K::status || r.kind == K::metrics ||
                            r.kind == K::dashboard || (r.kind == K::engine_log && r.follow);
    if (!model && !monitoring) {
        observe::RequestRecord rec;
        rec.id = request_id(req);
        const std::string_view target = req.target();
        rec.route = std::string(req.method_string()) + " " + std::string(target.substr(0, target.find('?')));
        rec.model = r.engine;
        rec.status = status;
        rec.error_type = error_type;
        rec.duration_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count();
        log_request(rec);
    }
    co_return keep;
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
            case Route::Kind::model: {
                const nlohmann::json list = co_await broker_.models();
                for (const auto& m : list["data"]) {
                    const auto& aliases = m["loch"]["aliases"];
                    if (m["id"] == r.engine ||
                        std::find(aliases.begin(), aliases.end(), r.engine) != aliases.end()) {
                        co_await write_json(stream, v, keep, 200, m);
                        co_return keep;
                    }
                }
                throw Error(ErrorKind::model_not_found, "no model named '" + r.engine + "'",
                            {{"model", r.engine}});
            }
            case Route::Kind::ollama_version:
                // The Ollama API version loch's routes follow (clients may gate features on it), and loch's
                // own.
                co_await write_json(stream, v, keep, 200, {{"version", "0.12.0"}, {"server", "loch 0.1.0"}});
                co_return keep;
            case Route::Kind::ollama_tags:
            case Route::Kind::ollama_ps: {
                const nlohmann::json answer =
                    ollama_models(co_await broker_.status(), r.kind == Route::Kind::ollama_ps);
                co_await write_json(stream, v, keep, 200, answer);
                co_return keep;
            }
            case Route::Kind::ollama_pull:
                throw Error(ErrorKind::invalid_request,
                            "loch does not download models: put the model file in the models folder "
                            "(--models-dir) or name it in loch.yaml, then ask for it by name");
            case Route::Kind::status: {
                nlohmann::json body = co_await broker_.status();
                body["requests"] = metrics_.summary();
                body["in_flight"] = in_flight();
                body["batches"] = batches();
                body["event_loop"] = loop_lag_.json();
                body["connections"] = connection_figures();
                body["upstream_connections"] = {
                    {"idle", pool_.idle_count()}, {"connects", pool_.connects()}, {"reuses", pool_.reuses()}};
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
                if (r.follow) co_return co_await follow_log(stream, req, r);
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
            case Route::Kind::ollama_generation:
                co_return co_await model_request(stream, req, r, conn);
            case Route::Kind::ollama_show: {
                const auto body = nlohmann::json::parse(req.body(), nullptr, false);
                // The client's JSON: a name that is not a string is no name.
                const auto text = [&](const char* k) {
                    const auto it = body.is_object() ? body.find(k) : body.end();
                    return it != body.end() && it->is_string() ? it->get<std::string>() : std::string();
                };
                const std::string name = text("model").empty() ? text("name") : text("model");
                if (name.empty())
                    throw Error(ErrorKind::invalid_request,
                                "POST /api/show needs a JSON body {\"model\": \"<name>\"}");
                const auto shown = ollama_show(co_await broker_.status(), name);
                if (!shown)
                    throw Error(ErrorKind::model_not_found, "no model named '" + name + "'",
                                {{"model", name}});
                co_await write_json(stream, v, keep, 200, *shown);
                co_return keep;
            }
            case Route::Kind::metrics: {
                auto status = co_await broker_.status();
                status["event_loop"] = loop_lag_.json();
                status["connections"] = connection_figures();
                status["batches"] = batches();
                co_await write_text(stream, v, keep, 200, "text/plain; version=0.0.4; charset=utf-8",
                                    metrics_.exposition(status));
                co_return keep;
            }
            case Route::Kind::dashboard:
                co_return co_await dashboard(stream, req);
            case Route::Kind::sdapi_models:
                co_await write_json(stream, v, keep, 200,
                                    sd_models(broker_.models_serving(to_string(Endpoint::sdapi_txt2img))));
                co_return keep;
            case Route::Kind::model_load: {
                const nlohmann::json answer = co_await broker_.preload(r.engine);
                co_await write_json(stream, v, keep, 200, answer);
                co_return keep;
            }
            case Route::Kind::holds_list: {
                const nlohmann::json answer = {{"holds", broker_.holds()}};
                co_await write_json(stream, v, keep, 200, answer);
                co_return keep;
            }
            case Route::Kind::hold_create: {
                const auto body = nlohmann::json::parse(req.body(), nullptr, false);
                if (body.is_discarded())
                    throw Error(ErrorKind::invalid_request,
                                "POST /loch/holds needs a JSON body: {\"memory\": \"12GiB\"}");
                const nlohmann::json answer = co_await broker_.create_hold(broker::hold_spec_from_json(body));
                co_await write_json(stream, v, keep, answer["state"] == "granted" ? 201 : 202, answer);
                co_return keep;
            }
            case Route::Kind::hold_get:
            case Route::Kind::hold_update:
            case Route::Kind::hold_release: {
                std::optional<nlohmann::json> answer;
                if (r.kind == Route::Kind::hold_get) {
                    answer = broker_.hold(r.engine);
                } else if (r.kind == Route::Kind::hold_release) {
                    answer = broker_.release_hold(r.engine, "released by its client (DELETE)");
                } else {
                    const auto body = req.body().empty() ? nlohmann::json::object()
                                                         : nlohmann::json::parse(req.body(), nullptr, false);
                    if (!body.is_object() || (body.contains("pgid") && !body["pgid"].is_number_integer()))
                        throw Error(ErrorKind::invalid_request,
                                    "POST /loch/holds/{id} takes {} or {\"pgid\": <process group id>}");
                    answer = broker_.update_hold(r.engine, body.contains("pgid")
                                                               ? std::optional<int>(body["pgid"].get<int>())
                                                               : std::nullopt);
                }
                if (!answer)
                    throw Error(ErrorKind::not_found,
                                "no hold '" + r.engine + "' (it ended long ago, or never was)",
                                {{"hold", r.engine}});
                co_await write_json(stream, v, keep, 200, *answer);
                co_return keep;
            }
            case Route::Kind::files:
                co_return co_await files_route(stream, req, r);
            case Route::Kind::batches:
                co_return co_await batches_route(stream, req, r);
            case Route::Kind::requests_list:
                co_await write_json(stream, v, keep, 200, {{"requests", in_flight()}});
                co_return keep;
            case Route::Kind::request_cancel:
                co_await write_json(stream, v, keep, 200, cancel(r.engine));
                co_return keep;
            case Route::Kind::model_unload: {
                const nlohmann::json answer = co_await broker_.unload(r.engine);
                co_await write_json(stream, v, keep, 200, answer);
                co_return keep;
            }
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
    status = static_cast<unsigned>(status_of(err->kind()));
    error_type = broker::to_string(err->kind());
    // Ollama's namespace (/api/…) answers in Ollama's error shape: its clients read `error` as a string.
    const bool ollama = std::string_view(req.target()).starts_with("/api/");
    if (ollama)
        co_await write_json(stream, v, keep, status,
                            ollama_error_body(err->what(), error_type, err->details()), err->retry_after_s());
    else
        co_await write_error(stream, v, keep, *err, allow);
    co_return keep;
}

}  // namespace loch::http
