// The OpenAI proxy path of http/server: parse → acquire a slot → context check → relay.
//
// Lifetime rule: everything a relay opens ends with the relay. RelayGuard closes the upstream socket (the
// engine sees the connection close and cancels its task) and stops the helpers on every exit path —
// success, error, client gone, shutdown — so no socket or timer outlives the response.
#include <sys/socket.h>

#include <cerrno>
#include <charconv>
#include <optional>
#include <utility>

#include <fmt/format.h>
#include <spdlog/spdlog.h>
#include <boost/asio/as_tuple.hpp>
#include <boost/asio/co_spawn.hpp>
#include <boost/asio/detached.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <boost/asio/write.hpp>
#include <boost/beast/http.hpp>

#include "engines/engine_client.hpp"
#include "http/errors.hpp"
#include "http/io_now.hpp"
#include "http/sdapi.hpp"
#include "http/server.hpp"
#include "http/sse.hpp"

namespace loch::http {

namespace asio = boost::asio;
namespace beast = boost::beast;
namespace bhttp = beast::http;
using asio::ip::tcp;
using broker::Error;
using broker::ErrorKind;
using namespace std::chrono_literals;

namespace {

// Whether the client closed its connection (a FIN or a reset is waiting on the socket): one non-blocking
// peek, no read of the client's bytes. A request whose client left while it waited in the queue is dropped at
// its grant, whatever its kind: an engine that does not stop on a hang-up (sd-server) would otherwise spend
// minutes on a picture nobody will see.
bool client_hung_up(tcp::socket& s) {
    char byte = 0;
    const ssize_t n = ::recv(s.native_handle(), &byte, 1, MSG_PEEK | MSG_DONTWAIT);
    if (n == 0) return true;
    return n < 0 && errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR;
}

// A client that takes nothing for this long while loch writes to it is gone.
constexpr auto kClientWriteTimeout = 60s;

// Part of a streamed body: a chunk, or (HTTP/1.0, no chunked encoding) the bytes as they are. Nothing for no
// bytes: an empty chunk would be the end of the body.
asio::awaitable<boost::system::error_code> write_body_bytes(beast::tcp_stream& client, std::string_view bytes,
                                                            bool chunked) {
    if (bytes.empty()) co_return boost::system::error_code{};
    if (chunked)
        co_return co_await io_now::write(client, bhttp::make_chunk(asio::buffer(bytes)), kClientWriteTimeout);
    co_return co_await io_now::write(client, asio::buffer(bytes), kClientWriteTimeout);
}

// Bytes as they are (the head already said their length); true when the client is gone.
asio::awaitable<bool> write_raw(beast::tcp_stream& client, std::string_view bytes) {
    co_return static_cast<bool>(co_await write_body_bytes(client, bytes, /*chunked=*/false));
}

// Ends the relay on every path: marks it done and closes the upstream socket now (not when the client watch
// lets go of the state).
struct RelayGuard {
    std::shared_ptr<RelayState> st;
    ~RelayGuard() { st->finish(); }
};

// Notices a client that hangs up while loch waits on the engine: readable + recv() == 0 means EOF. Then the
// upstream connection is closed, which the engine sees as a closed connection and stops generating. Used
// when the connection's next read cannot be started early (Connection: bytes of a pipelined request are
// buffered already).
//
// A plain completion handler, not a coroutine. RelayState::finish() cancels it (left pending, it would
// complete first when the next request arrives and push the session's read to a pass of its own), and it
// holds the relay weakly all the same.
void watch_client(tcp::socket& client, const std::shared_ptr<RelayState>& st) {
    st->watched = &client;
    client.async_wait(tcp::socket::wait_read,
                      [&client, weak = std::weak_ptr<RelayState>(st)](boost::system::error_code ec) {
                          // The relay holds the only strong reference: it is alive, and so is its client
                          // socket.
                          const auto relay = weak.lock();
                          if (ec || !relay || relay->done) return;
                          char c;
                          const auto n = ::recv(client.native_handle(), &c, 1, MSG_PEEK | MSG_DONTWAIT);
                          if (n == 0 || (n < 0 && errno != EAGAIN && errno != EWOULDBLOCK)) {
                              relay->client_gone = true;
                              relay->close_upstream();
                          }
                          // n > 0: a pipelined next request; it is read after this response.
                      });
}

// A streamed request's watchdog: an upstream read that waits longer than `limit` is cancelled (and then ends
// with beast's timeout). One timer per request, not per read: a read only notes when it starts and ends, and
// the timer, when it fires before the limit, waits for what is left (a Beast stream timeout armed and
// cancelled a timer on every event). Time spent writing to a slow client is not the engine's silence. Holds
// the relay weakly; destroyed with the relay, it cancels its timer.
class StreamWatchdog {
  public:
    StreamWatchdog(asio::any_io_executor ex, const std::shared_ptr<RelayState>& relay,
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
        State(asio::any_io_executor ex, const std::shared_ptr<RelayState>& r,
              std::chrono::steady_clock::duration l)
            : timer(std::move(ex)), relay(r), limit(l), since(std::chrono::steady_clock::now()) {}
        asio::steady_timer timer;
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

// What an upstream failure means for the client: loch is shutting down, a stream's watchdog fired, the engine
// hung (its health watch killed it: a non-streamed answer sends nothing until done, so that watch, not
// silence on the socket, is its watchdog), or it died (with its exit report when it ended within a
// moment), or the connection broke.
asio::awaitable<Error> upstream_failure(broker::Broker& broker, const broker::Lease& lease, bool stream,
                                        std::chrono::seconds watchdog, const RelayState& st,
                                        boost::system::error_code ec) {
    if (st.abort) co_return *st.abort;
    const std::string& model = lease.model();
    nlohmann::json d = nlohmann::json::object();
    d["model"] = model;
    if (stream && ec == beast::error::timeout) {
        d["watchdog_s"] = watchdog.count();
        co_return Error(
            ErrorKind::watchdog_timeout,
            fmt::format("engine of model '{}' sent nothing for {} s (watchdog)", model, watchdog.count()),
            std::move(d));
    }
    std::optional<engines::ExitReport> report = co_await broker.exit_report(lease.engine(), 1500ms);
    d["transport_error"] = ec.message();
    if (report && report->kind == engines::ExitKind::hung) {
        d["exit"] = *report;
        co_return Error(
            ErrorKind::watchdog_timeout,
            fmt::format("the engine of model '{}' hung mid-request (watchdog): {}", model, report->summary),
            std::move(d));
    }
    if (report) {
        d["exit"] = *report;
        std::string msg =
            fmt::format("the engine of model '{}' died mid-request: {}", model, report->summary);
        co_return Error(ErrorKind::engine_failed, std::move(msg), std::move(d));
    }
    std::string msg = fmt::format("the engine of model '{}' broke the connection: {}", model, ec.message());
    co_return Error(ErrorKind::engine_failed, std::move(msg), std::move(d));
}

}  // namespace

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

void RelayState::close_upstream() {
    if (!upstream) return;
    boost::system::error_code ec;
    upstream->socket().shutdown(tcp::socket::shutdown_both, ec);
    upstream->socket().close(ec);
}

void RelayState::finish() {
    done = true;
    close_upstream();
    if (watched) {
        boost::system::error_code ec;
        std::exchange(watched, nullptr)->cancel(ec);
    }
}

namespace {

Error refusal_error(const std::string& model, engines::Refusal no) {
    no.details["model"] = model;
    const auto kind = no.kind == engines::Refusal::Kind::context_length_exceeded
                          ? ErrorKind::context_length_exceeded
                      : no.kind == engines::Refusal::Kind::too_large ? ErrorKind::request_too_large
                                                                     : ErrorKind::invalid_request;
    return Error(kind, fmt::format("model '{}': {}", model, no.message), std::move(no.details));
}

}  // namespace

// The model's kind may refuse the request before it is sent (llama-server: prompt tokens vs slot context).
asio::awaitable<void> Server::check_request(const broker::Lease& lease, const OpenAIRequest& r) {
    engines::RequestView view;
    view.route = to_string(r.endpoint);
    view.body = &r.body;
    view.prompt_bytes = r.prompt_bytes;
    view.prompt_token_ids = r.prompt_token_ids;
    view.max_tokens = r.max_tokens;
    view.model = lease.config();
    view.images = r.images;
    auto no = co_await lease.kind().check_request(ex_, lease.address(), lease.facts(), view);
    if (no) throw refusal_error(lease.model(), std::move(*no));
}

namespace {

// What the engine's answer says it used: OpenAI's `usage`, or llama-server's `timings`.
void take_usage(const nlohmann::json& j, observe::RequestRecord& rec) {
    if (!j.is_object()) return;
    if (j.contains("usage") && j["usage"].is_object()) {
        const auto& u = j["usage"];
        if (u.contains("prompt_tokens") && u["prompt_tokens"].is_number_unsigned())
            rec.prompt_tokens = u["prompt_tokens"].get<std::uint64_t>();
        if (u.contains("completion_tokens") && u["completion_tokens"].is_number_unsigned())
            rec.completion_tokens = u["completion_tokens"].get<std::uint64_t>();
        if (const auto d = u.find("prompt_tokens_details"); d != u.end() && d->is_object())
            if (const auto c = d->find("cached_tokens"); c != d->end() && c->is_number_unsigned())
                rec.cached_tokens = c->get<std::uint64_t>();
    }
    if (j.contains("timings") && j["timings"].is_object()) {
        const auto& t = j["timings"];
        if (!rec.prompt_tokens && t.contains("prompt_n") && t["prompt_n"].is_number_unsigned())
            rec.prompt_tokens = t["prompt_n"].get<std::uint64_t>();
        if (!rec.completion_tokens && t.contains("predicted_n") && t["predicted_n"].is_number_unsigned())
            rec.completion_tokens = t["predicted_n"].get<std::uint64_t>();
        if (!rec.cached_tokens && t.contains("cache_n") && t["cache_n"].is_number_unsigned())
            rec.cached_tokens = t["cache_n"].get<std::uint64_t>();
    }
}

// The same from a whole JSON answer without parsing it (this is on every request's path): a key is a quoted
// name followed by ':', which a JSON string value cannot contain unescaped.
std::optional<std::uint64_t> number_after(std::string_view body, std::string_view key) {
    const auto at = body.find(key);
    if (at == std::string_view::npos) return std::nullopt;
    auto p = at + key.size();
    while (p < body.size() && (body[p] == ' ' || body[p] == '\t' || body[p] == '\n' || body[p] == '\r')) ++p;
    std::uint64_t v = 0;
    const auto [end, ec] = std::from_chars(body.data() + p, body.data() + body.size(), v);
    if (ec != std::errc()) return std::nullopt;
    return v;
}
void take_usage_scan(std::string_view body, observe::RequestRecord& rec) {
    rec.prompt_tokens = number_after(body, "\"prompt_tokens\":");
    rec.completion_tokens = number_after(body, "\"completion_tokens\":");
    // (Only after a restore: the one answer whose reuse is checked. A scan for a key is cheap, but not free.)
    if (rec.restore) {
        rec.cached_tokens = number_after(body, "\"cached_tokens\":");
        if (!rec.cached_tokens) rec.cached_tokens = number_after(body, "\"cache_n\":");
    }
}

// The engine's error answer as loch's error (a JSON answer after the SSE head went out can only be told
// as an event).
Error engine_answer_error(unsigned status, std::string_view body, const std::string& model) {
    auto j = nlohmann::json::parse(body, nullptr, false);
    std::string msg(body.substr(0, 500));
    // Engine output: any shape at all (a message that is not a string is shown as the JSON it is).
    if (!j.is_discarded() && j.is_object() && j.contains("error")) {
        const auto& e = j["error"];
        const auto m = e.is_object() ? e.find("message") : e.end();
        if (!e.is_object())
            msg = e.is_string() ? e.get<std::string>() : dump(e);
        else if (m != e.end())
            msg = m->is_string() ? m->get<std::string>() : dump(*m);
    }
    return Error(status < 500 ? ErrorKind::invalid_request : ErrorKind::engine_failed,
                 fmt::format("the engine of model '{}' answered {}: {}", model, status, msg),
                 {{"model", model}, {"engine_status", status}});
}

std::string sse_head_comment(const nlohmann::json& p, std::chrono::steady_clock::duration waited) {
    std::string line = fmt::format(": loch: waiting {:.0f} s for model '{}' ({})",
                                   std::chrono::duration<double>(waited).count(), p.value("model", ""),
                                   p.value("state", ""));
    if (p.contains("loading")) {
        const auto& l = p["loading"];
        line += fmt::format(": loading for {:.0f} s", l.value("elapsed_s", 0.0));
        if (l.contains("expected_s"))
            line += fmt::format(" of about {:.0f} s", l["expected_s"].get<double>());
    } else if (!p.value("reason", "").empty()) {
        line += ": " + p.value("reason", "");
    }
    for (auto& c : line)
        if (c == '\n' || c == '\r') c = ' ';
    return line + "\n\n";
}

}  // namespace

asio::awaitable<std::optional<broker::Lease>> Server::acquire_with_heartbeat(
    beast::tcp_stream& client, unsigned version, const std::string& model, const broker::RequestNeeds& needs,
    bool progress_events, bool& headers_sent) {
    // The acquire runs beside this loop; the loop alone writes to the client. A client that leaves does
    // not cancel the acquire: its lease, when granted, is dropped (released) by the shared state.
    struct Pending {
        explicit Pending(asio::any_io_executor ex) : wake(ex) {}
        asio::steady_timer wake;
        std::optional<broker::Lease> lease;
        std::exception_ptr error;
        bool done = false;
    };
    auto p = std::make_shared<Pending>(ex_);
    asio::co_spawn(
        ex_,
        [this, p, model, needs]() -> asio::awaitable<void> {
            try {
                p->lease = co_await broker_.acquire(model, needs);
            } catch (...) {
                p->error = std::current_exception();
            }
            p->done = true;
            p->wake.cancel();
        },
        asio::detached);
    const auto started = std::chrono::steady_clock::now();
    const bool chunked = version >= 11;
    while (!p->done) {
        p->wake.expires_after(headers_sent ? options_.heartbeat : options_.first_heartbeat);
        co_await p->wake.async_wait(tok);
        if (p->done) break;
        if (!headers_sent) {
            bhttp::response<bhttp::empty_body> head{bhttp::status::ok, version};
            head.set(bhttp::field::server, "loch");
            head.set(bhttp::field::content_type, "text/event-stream");
            head.set(bhttp::field::cache_control, "no-cache");
            head.keep_alive(chunked);
            if (chunked) head.chunked(true);
            if (co_await io_now::write_header(client, head, kClientWriteTimeout)) co_return std::nullopt;
            headers_sent = true;
        }
        const auto progress = broker_.progress(model);
        std::string out = sse_head_comment(progress, std::chrono::steady_clock::now() - started);
        if (progress_events) {
            nlohmann::json ev = progress;
            ev["waited_s"] =
                std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count();
            out += "event: loch.progress\ndata: " + dump(ev) + "\n\n";
        }
        if (co_await write_body_bytes(client, out, chunked)) co_return std::nullopt;
    }
    if (p->error) std::rethrow_exception(p->error);
    co_return std::move(p->lease);
}

asio::awaitable<bool> Server::proxy(beast::tcp_stream& client, Request& req, ProxyCall call) {
    const unsigned v = req.version();
    const bool keep = req.keep_alive();
    // HTTP/1.0 has no chunked encoding: a stream to such a client is delimited by closing the connection.
    const bool chunked = v >= 11;
    auto& rec = *call.record;
    auto st = std::make_shared<RelayState>();
    RelayGuard guard{st};
    const auto registration = register_relay(st);
    bool headers_sent = false;
    std::optional<Error> err;
    broker::Lease lease;
    Translation* tr = call.translation;
    std::optional<ModelRename> rename;
    const auto write_body = [&](std::string_view bytes) { return write_body_bytes(client, bytes, chunked); };
    const auto gone = [&] {
        rec.client_gone = true;
        rec.status = 499;  // nginx's "client closed request"
        return false;
    };
    try {
        std::string_view content_type = "application/json";
        if (const auto ct = req.find(bhttp::field::content_type); ct != req.end())
            content_type = std::string_view(ct->value().data(), ct->value().size());
        OpenAIRequest oreq = parse_openai_request(call.endpoint, req.body(), content_type);
        if (oreq.endpoint == Endpoint::sdapi_txt2img && !oreq.body.contains("model"))
            oreq.model = sdapi_model(oreq.model, broker_.models_serving(to_string(oreq.endpoint)));
        rec.model = oreq.model;
        rec.stream = oreq.stream;
        st->id = rec.id;
        st->model = oreq.model;
        st->route = rec.route;
        broker::RequestNeeds needs;
        needs.request_id = rec.id;
        needs.max_tokens = oreq.max_tokens;
        needs.route = std::string(to_string(oreq.endpoint));
        needs.keep_alive = call.keep_alive;
        // A request may lower its priority (the Batch API's items do), never raise it: interactive is the
        // most any request gets, and a model configured as batch stays batch.
        if (const auto p = req.find("X-Loch-Priority"); p != req.end()) {
            if (beast::iequals(p->value(), "batch"))
                needs.priority = config::Priority::batch;
            else if (!beast::iequals(p->value(), "interactive"))
                throw Error(ErrorKind::invalid_request,
                            fmt::format("X-Loch-Priority is batch or interactive, not '{}'",
                                        std::string_view(p->value().data(), p->value().size())));
        }
        {
            engines::RequestView view;
            view.route = to_string(oreq.endpoint);
            view.body = &oreq.body;
            view.prompt_bytes = oreq.prompt_bytes;
            view.images = oreq.images;
            // Refused from the config alone (an upload over the model's limits): nothing starts for it.
            if (auto no = broker_.check_before_start(oreq.model, view))
                throw refusal_error(oreq.model, std::move(*no));
            needs.transient = broker_.request_cost(oreq.model, view);  // an image's compute, by its kind
        }
        const std::string notice = needs.transient ? needs.transient->notice : std::string();
        // A streaming OpenAI client that has to wait hears from loch while it waits.
        const bool sse_client = oreq.stream && !tr;
        if (auto now = broker_.try_acquire(oreq.model, needs)) {
            lease = std::move(*now);
        } else if (sse_client) {
            // (The client's JSON: only a boolean true asks for them; anything else is no.)
            const auto l = oreq.body.find("loch");
            const bool progress_events = l != oreq.body.end() && l->is_object() && l->contains("progress") &&
                                         (*l)["progress"].is_boolean() && (*l)["progress"].get<bool>();
            auto got =
                co_await acquire_with_heartbeat(client, v, oreq.model, needs, progress_events, headers_sent);
            if (!got) co_return gone();
            lease = std::move(*got);
        } else {
            lease = co_await broker_.acquire(oreq.model, needs);
        }
        rec.model = lease.model();
        rec.priority = lease.priority();
        rec.decision = lease.decision();
        rec.queue_wait_s = std::chrono::duration<double>(lease.queue_wait()).count();
        st->model = lease.model();
        st->granted = true;
        st->cancellable = lease.kind().cancels_on_disconnect();
        if (st->abort) throw *st->abort;  // shut down or cancelled while it waited
        // Only a request that waited can have lost its client meanwhile: one granted at once pays no syscall.
        // (The lease goes back as it leaves scope.)
        if (lease.queue_wait() > std::chrono::steady_clock::duration::zero() &&
            client_hung_up(client.socket()))
            co_return gone();
        if (call.num_ctx && lease.slot_ctx() && *call.num_ctx > *lease.slot_ctx())
            throw Error(
                ErrorKind::context_length_exceeded,
                fmt::format("options.num_ctx {} is larger than the slot context of model '{}' ({} tokens): "
                            "loch runs the model with the context of its config; raise args.ctx (or "
                            "lower args.parallel) in loch.yaml, or ask for at most {}",
                            *call.num_ctx, lease.model(), *lease.slot_ctx(), *lease.slot_ctx()),
                {{"model", lease.model()}, {"num_ctx", *call.num_ctx}, {"slot_ctx", *lease.slot_ctx()}});
        co_await check_request(lease, oreq);
        // A conversation saved when its engine was stopped goes back into a slot before it is re-read.
        if (broker_.has_saved_slots(lease)) {
            engines::RequestView view;
            view.route = to_string(oreq.endpoint);
            view.body = &oreq.body;
            view.images = oreq.images;
            if (broker_.may_restore(lease, view))
                if (auto restored = co_await broker_.restore_conversation(lease, view, req.body()))
                    rec.restore = std::move(*restored);  // confirmed by the answer (confirm_restore)
        }
        if (!tr && !lease.kind().names_model_as_configured()) {
            rename.emplace(lease.model());
            tr = &*rename;
        }

        // An engine that stops a request when its connection closes is told so when the client leaves; one
        // that cannot (sd-server) keeps the request, its slot and its reservation until it has finished.
        if (lease.kind().cancels_on_disconnect() && !call.conn->start_next_read(st))
            watch_client(client.socket(), st);

        // The engine's own path for this route (and its body, where the kind must change it).
        if (!call.translation) {
            const auto ct = req.find(bhttp::field::content_type);
            call.upstream_path = lease.kind().upstream(
                call.upstream_path, ct == req.end() ? std::string_view() : std::string_view(ct->value()),
                req.body());
        }
        bhttp::request<bhttp::string_body> ureq{bhttp::verb::post, call.upstream_path, 11};
        ureq.set(bhttp::field::host, lease.host() + ":" + std::to_string(lease.port()));
        // The client's body kind goes upstream as it came (JSON today; multipart for images and audio).
        if (auto ct = req.find(bhttp::field::content_type); ct != req.end() && !call.translation)
            ureq.set(bhttp::field::content_type, ct->value());
        else
            ureq.set(bhttp::field::content_type, "application/json");
        if (!lease.address().api_key.empty())
            ureq.set(bhttp::field::authorization, "Bearer " + lease.address().api_key);
        if (auto a = req.find(bhttp::field::accept); a != req.end() && !call.translation)
            ureq.set(bhttp::field::accept, a->value());
        ureq.body() = std::move(req.body());  // the client's bytes, untouched
        ureq.prepare_payload();

        const auto watchdog = lease.watchdog().value_or(options_.default_watchdog);
        // A stream's engine may not be silent for longer than its watchdog; a non-streamed answer may take
        // long legitimately (an engine that hangs is killed by its health watch, which ends this read).
        std::optional<StreamWatchdog> dog;
        if (oreq.stream) dog.emplace(ex_, st, watchdog);
        // The read's error as the relay tells it: a cancel by the watchdog is the engine's silence.
        const auto read_error = [&](boost::system::error_code ec) {
            return st->silent ? boost::system::error_code(beast::error::timeout) : ec;
        };
        boost::system::error_code aec;
        const tcp::endpoint engine_ep(asio::ip::make_address(lease.host(), aec), lease.port());
        // The engine run's secret is in the key: a restarted engine never gets an old run's socket.
        const std::string pool_key = upstream_key(engine_ep.port(), lease.address().api_key);
        RelayBuffers& buffers = call.conn->relay_buffers();
        beast::flat_buffer& ubuf = buffers.upstream;
        ubuf.clear();
        // One read takes a whole small answer (Beast reads 512 bytes into an empty buffer).
        ubuf.reserve(16 * 1024);
        std::optional<bhttp::response_parser<bhttp::buffer_body>> parser_slot;
        const auto ex = co_await pool_.exchange(
            pool_key, engine_ep, ureq, ubuf, parser_slot,
            [&] { return !st->client_gone && !st->abort && !st->silent; },
            [&](std::shared_ptr<beast::tcp_stream> s) { st->upstream = std::move(s); });
        if (ex.connect_failed)
            throw Error(ErrorKind::engine_failed, "cannot connect to the engine: " + ex.ec.message());
        if (ex.ec) {
            if (st->client_gone) co_return gone();
            Error failure =
                co_await upstream_failure(broker_, lease, oreq.stream, watchdog, *st, read_error(ex.ec));
            throw failure;
        }
        if (dog) dog->heard();
        auto& up = st->upstream->socket();
        auto& parser = *parser_slot;
        // After one whole response the engine lets us keep, the connection goes back to the pool instead of
        // being closed by RelayGuard.
        const auto keep_upstream = [&] {
            if (parser.is_done() && parser.keep_alive() && !st->client_gone && !st->abort)
                pool_.give_back(pool_key, std::exchange(st->upstream, nullptr), oreq.stream);
        };
        const auto& uh = parser.get();
        const unsigned status = uh.result_int();
        // The client's head for a JSON answer: the engine's status and type, loch as the server.
        const auto json_head = [&](auto& m) {
            m.set(bhttp::field::server, "loch");
            m.set(bhttp::field::content_type, uh[bhttp::field::content_type].empty() || call.translation
                                                  ? std::string("application/json")
                                                  : std::string(uh[bhttp::field::content_type]));
            m.set("X-Request-Id", rec.id);
            if (!notice.empty()) m.set("X-Loch-Notice", notice);
            m.keep_alive(keep);
        };
        const bool sse = std::string_view(uh[bhttp::field::content_type]).starts_with("text/event-stream");
        char* const tmp = buffers.body.data();
        constexpr std::size_t kTmp = sizeof(RelayBuffers::body);
        // The next piece of the engine's body into tmp, timed by a stream's watchdog; the error as the relay
        // tells it.
        const auto read_piece = [&]() -> asio::awaitable<boost::system::error_code> {
            parser.get().body().data = tmp;
            parser.get().body().size = kTmp;
            if (dog) dog->reading();
            const auto ec = co_await io_now::read_some(up, ubuf, parser);
            if (dog) dog->heard();
            co_return read_error(ec);
        };

        if (!sse) {
            // A JSON answer. A small one (the usual case: llama-server sends the body at once when it is
            // done) leaves in one write with the head; a long one of known length (over kRelayFrom) is
            // relayed as it arrives after its first piece, unless it is translated or an error; one of
            // unknown length is collected first. The client's head carries the engine's status.
            constexpr std::uint64_t kRelayFrom = 64 * 1024;
            std::string body;
            const auto length = parser.content_length();
            const bool may_relay = !tr && status < 400 && !headers_sent;
            bool relaying = false;
            while (!parser.is_done()) {
                if (may_relay && !relaying && length && *length > kRelayFrom && !body.empty()) {
                    bhttp::response<bhttp::empty_body> head{uh.result(), v};
                    json_head(head);
                    head.content_length(*length);
                    if (co_await io_now::write_header(client, head, kClientWriteTimeout) ||
                        co_await write_raw(client, body))
                        co_return gone();
                    rec.status = status;
                    body.clear();
                    relaying = true;
                }
                if (const auto ec = co_await read_piece()) {
                    if (st->client_gone) co_return gone();
                    Error failure = co_await upstream_failure(broker_, lease, oreq.stream, watchdog, *st, ec);
                    if (relaying) {  // the head is out: closing short of the length is the only signal left
                        spdlog::warn("answer of '{}' cut short: {}", lease.model(), failure.what());
                        rec.error_type = broker::to_string(failure.kind());
                        co_return false;
                    }
                    throw failure;
                }
                const std::string_view piece(tmp, kTmp - parser.get().body().size);
                if (!relaying) {
                    body.append(piece);
                } else if (co_await write_raw(client, piece)) {
                    st->client_gone = true;
                    co_return gone();
                }
            }
            keep_upstream();
            st->finish();
            if (relaying) co_return keep;
            if (status >= 400) {
                if (auto fix =
                        lease.kind().explain_error(*lease.config(), call.upstream_path, status, body)) {
                    fix->details["model"] = lease.model();
                    fix->details["engine_answer"] = body.substr(0, 1000);
                    throw Error(ErrorKind::invalid_request, fix->message, std::move(fix->details));
                }
                if (headers_sent || tr) throw engine_answer_error(status, body, lease.model());
            }
            if (headers_sent) throw engine_answer_error(status, body, lease.model());
            if (status < 300) take_usage_scan(body, rec);
            if (status < 300 && lease.kind().reports_progress() && lease.engine())
                if (auto p = lease.kind().request_progress(lease.engine()->log_tail(40));
                    p && p->contains("seconds_per_step"))
                    rec.seconds_per_step = (*p)["seconds_per_step"].get<double>();
            bhttp::response<bhttp::string_body> res{uh.result(), v};
            json_head(res);
            res.body() = tr ? tr->answer(body, status) : std::move(body);
            res.prepare_payload();
            rec.status = status;
            const auto ec = co_await io_now::write_message(client, res, kClientWriteTimeout);
            // The slot goes back now, without a pass of the scheduler of its own — after the client's write,
            // so that what the broker does next (a keep_alive 0 engine's stop) is not on the answer's path.
            lease.release();
            co_return keep && !ec;
        }

        // Streaming: headers now (unless the heartbeat sent them), then the complete events as soon as they
        // are complete (the events of one upstream read leave in one write).
        if (!headers_sent) {
            bhttp::response<bhttp::empty_body> head{uh.result(), v};
            head.set(bhttp::field::server, "loch");
            head.set(bhttp::field::content_type,
                     tr ? tr->stream_content_type() : std::string(uh[bhttp::field::content_type]));
            head.set(bhttp::field::cache_control, "no-cache");
            head.set("X-Request-Id", rec.id);
            if (!notice.empty()) head.set("X-Loch-Notice", notice);
            head.keep_alive(keep && chunked);
            if (chunked) head.chunked(true);
            if (co_await io_now::write_header(client, head, kClientWriteTimeout)) co_return gone();
            headers_sent = true;
        }
        rec.status = status;

        SseFramer framer;
        std::string batch, last_data;
        const auto t0 = std::chrono::steady_clock::now();
        std::uint64_t events = 0;
        while (!parser.is_done()) {
            if (const auto ec = co_await read_piece()) {
                if (st->client_gone) co_return gone();
                Error failure = co_await upstream_failure(broker_, lease, oreq.stream, watchdog, *st, ec);
                throw failure;
            }
            const std::size_t got = kTmp - parser.get().body().size;
            const auto& read_events = framer.feed_views(std::string_view(tmp, got));
            if (read_events.empty()) continue;
            std::string_view last;
            batch.clear();
            for (const auto event : read_events) {
                if (!is_done_event(event) && event.starts_with("data:")) {
                    if (events++ == 0)
                        rec.ttft_s =
                            rec.queue_wait_s +
                            std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
                    last = event;
                }
                if (tr) batch += tr->event(event);
            }
            if (!last.empty()) last_data.assign(last);
            // Untranslated, the events of this read leave as they came: one run of the framer's bytes.
            if (co_await write_body(tr ? std::string_view(batch) : framer.complete())) {
                st->client_gone = true;
                co_return gone();
            }
        }
        keep_upstream();
        st->finish();
        // The last chunk carries the usage (with stream_options.include_usage) or llama-server's timings.
        if (auto j = sse_json(last_data)) take_usage(*j, rec);
        if (!rec.completion_tokens && events > 0) rec.completion_tokens = events;  // one token per chunk
        std::string rest = framer.take_rest();
        if (tr) rest = (rest.empty() ? std::string() : tr->event(rest)) + tr->end();
        if (!rest.empty()) co_await write_body(rest);
        if (!chunked) co_return false;  // HTTP/1.0: the end of the stream is the end of the connection
        const auto lec = co_await io_now::write(client, bhttp::make_chunk_last(), kClientWriteTimeout);
        lease.release();  // (as above)
        co_return keep && !lec;
    } catch (const Error& e) {
        err = e;
    } catch (const std::exception& e) {
        err = Error(ErrorKind::internal, std::string("internal error: ") + e.what());
    }
    st->finish();
    if (st->client_gone) co_return gone();
    rec.error_type = broker::to_string(err->kind());
    if (!headers_sent) {
        rec.status = static_cast<unsigned>(status_of(err->kind()));
        if (tr) {
            co_await write_json(client, v, keep, rec.status, tr->error_body(*err), err->retry_after_s());
        } else {
            co_await write_error(client, v, keep, *err);
        }
        co_return keep;
    }
    // Mid-stream: an SSE error event (or the translation's error line), then a clean end of the body.
    spdlog::warn("stream of '{}' ended by error: {}", lease.valid() ? lease.model() : rec.model, err->what());
    const std::string ev = tr ? tr->stream_error(*err) : sse_error_event(*err);
    co_await write_body(ev);
    if (chunked) co_await io_now::write(client, bhttp::make_chunk_last(), kClientWriteTimeout);
    co_return false;
}

}  // namespace loch::http
