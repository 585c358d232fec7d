// http/model_proxy — the proxy's phases: parse → acquire a slot → context check → relay.
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

#include "core/io_now.hpp"
#include "engines/engine_client.hpp"
#include "http/anthropic_shape.hpp"
#include "http/engine_answer.hpp"
#include "http/errors.hpp"
#include "http/model_proxy.hpp"
#include "http/respond.hpp"
#include "http/sdapi.hpp"
#include "http/sse.hpp"
#include "http/stream_watchdog.hpp"

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
        co_return co_await core::io_now::write(client, bhttp::make_chunk(asio::buffer(bytes)),
                                               kClientWriteTimeout);
    co_return co_await core::io_now::write(client, asio::buffer(bytes), kClientWriteTimeout);
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

}  // namespace

// The model's kind may refuse the request before it is sent (llama-server: prompt tokens vs slot context).
asio::awaitable<void> ModelProxy::check_request(const broker::Lease& lease, const OpenAIRequest& r) {
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

asio::awaitable<std::optional<broker::Lease>> ModelProxy::acquire_with_heartbeat(
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
            if (co_await core::io_now::write_header(client, head, kClientWriteTimeout))
                co_return std::nullopt;
            headers_sent = true;
        }
        const auto progress = broker_.view().progress(model);
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

asio::awaitable<bool> ModelProxy::proxy(beast::tcp_stream& client, Request& req, ProxyCall call) {
    const unsigned v = req.version();
    const bool keep = req.keep_alive();
    // HTTP/1.0 has no chunked encoding: a stream to such a client is delimited by closing the connection.
    const bool chunked = v >= 11;
    auto& rec = *call.record;
    auto st = std::make_shared<RelayState>();
    RelayGuard guard{st};
    const auto registration = relays_.add(st);
    bool headers_sent = false;
    std::optional<Error> err;
    broker::Lease lease;
    Translation* tr = call.translation;
    std::optional<ModelRename> rename;
    // Anthropic's routes answer in Anthropic's shape (msg_ ids, its error types and 529), errors included:
    // `shape` renders an error before or after the lease; tr takes it once the engine answers.
    std::optional<AnthropicShape> anthropic;
    if (!tr &&
        (call.endpoint == Endpoint::anthropic_messages || call.endpoint == Endpoint::anthropic_count_tokens))
        anthropic.emplace();
    // The Responses API's: reshaped as OpenAI's and kept (http/responses_api.hpp).
    std::optional<ResponsesShape> responses;
    const auto shape = [&]() -> Translation* { return tr ? tr : anthropic ? &*anthropic : nullptr; };
    const auto write_body = [&](std::string_view bytes) { return write_body_bytes(client, bytes, chunked); };
    const auto gone = [&] {
        rec.client_gone = true;
        rec.status = 499;  // nginx's "client closed request"
        return false;
    };
    try {
        // A previous_response_id becomes the stored conversation before anything counts the prompt.
        if (!tr && call.endpoint == Endpoint::responses)
            if (auto turn = responses_.prepare(req.body())) responses.emplace(responses_, std::move(*turn));
        std::string_view content_type = "application/json";
        if (const auto ct = req.find(bhttp::field::content_type); ct != req.end())
            content_type = std::string_view(ct->value().data(), ct->value().size());
        OpenAIRequest oreq = parse_openai_request(call.endpoint, req.body(), content_type);
        if (oreq.endpoint == Endpoint::sdapi_txt2img && !oreq.body.contains("model"))
            oreq.model = sdapi_model(oreq.model, broker_.view().models_serving(to_string(oreq.endpoint)));
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
            if (auto no = broker_.view().check_before_start(oreq.model, view))
                throw refusal_error(oreq.model, std::move(*no));
            needs.transient =
                broker_.view().request_cost(oreq.model, view);  // an image's compute, by its kind
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
        if (auto& conversations = broker_.conversations(); conversations.has_saved(lease)) {
            engines::RequestView view;
            view.route = to_string(oreq.endpoint);
            view.body = &oreq.body;
            view.images = oreq.images;
            if (conversations.may_restore(lease, view))
                if (auto restored = co_await conversations.restore(lease, view, req.body()))
                    rec.restore = std::move(*restored);  // confirmed by the answer (Conversations::confirm)
        }
        if (anthropic) {
            if (!lease.kind().names_model_as_configured()) anthropic.emplace(lease.model());
            tr = &*anthropic;
        } else if (responses) {
            responses->name_model(lease.model());
            tr = &*responses;
        } else if (!tr && !lease.kind().names_model_as_configured()) {
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
        const std::string pool_key = core::pool_key(engine_ep.port(), lease.address().api_key);
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
            Error failure = co_await upstream_failure(broker_.view(), lease, oreq.stream, watchdog, st->abort,
                                                      read_error(ex.ec));
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
            const auto ec = co_await core::io_now::read_some(up, ubuf, parser);
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
                    if (co_await core::io_now::write_header(client, head, kClientWriteTimeout) ||
                        co_await write_raw(client, body))
                        co_return gone();
                    rec.status = status;
                    body.clear();
                    relaying = true;
                }
                if (const auto ec = co_await read_piece()) {
                    if (st->client_gone) co_return gone();
                    Error failure = co_await upstream_failure(broker_.view(), lease, oreq.stream, watchdog,
                                                              st->abort, ec);
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
            if (status >= 400) {
                // Relayed as the engine answered it, but recorded and logged for what it is: not an "ok"
                // (a 500 from the engine is loch's to explain, not the request log's to hide).
                const Error said = engine_answer_error(status, body, lease.model());
                rec.error_type = broker::to_string(said.kind());
                if (status >= 500)
                    spdlog::warn("request {} ({}): {}", rec.id, call.upstream_path, said.what());
            }
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
            const auto ec = co_await core::io_now::write_message(client, res, kClientWriteTimeout);
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
            if (co_await core::io_now::write_header(client, head, kClientWriteTimeout)) co_return gone();
            headers_sent = true;
        }
        rec.status = status;

        SseFramer framer;
        std::string batch, last_data, first_usage;
        const auto t0 = std::chrono::steady_clock::now();
        std::uint64_t events = 0;
        // Once the final event is out, a client that hangs up has its whole answer (Codex closes right after
        // response.completed): the request is answered, and a translation ends as it would have.
        bool answered = false;
        // The last chunk carries the usage (with stream_options.include_usage) or llama-server's timings.
        const auto take_stream_usage = [&] {
            if (!first_usage.empty())
                if (auto j = sse_json(first_usage)) take_usage(*j, rec);
            if (auto j = sse_json(last_data)) take_usage(*j, rec);
            if (!rec.completion_tokens && events > 0) rec.completion_tokens = events;  // one token per chunk
        };
        const auto gone_or_answered = [&] {
            if (!answered) return gone();
            rec.status = status;
            take_stream_usage();
            if (tr) (void)tr->end();
            return false;
        };
        while (!parser.is_done()) {
            if (const auto ec = co_await read_piece()) {
                if (st->client_gone) co_return gone_or_answered();
                Error failure =
                    co_await upstream_failure(broker_.view(), lease, oreq.stream, watchdog, st->abort, ec);
                throw failure;
            }
            const std::size_t got = kTmp - parser.get().body().size;
            const auto& read_events = framer.feed_views(std::string_view(tmp, got));
            if (read_events.empty()) continue;
            std::string_view last;
            batch.clear();
            for (const auto event : read_events) {
                // Chat's events are `data:` lines; the Responses API's and Anthropic's name their type first.
                if (!is_done_event(event) &&
                    (event.starts_with("data:") || event.find("\ndata:") != event.npos)) {
                    if (events++ == 0)
                        rec.ttft_s =
                            rec.queue_wait_s +
                            std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
                    // What it used: the last event with a usage or timings (chat's last chunk, the Responses
                    // API's response.completed, Anthropic's message_delta — its message_stop follows), and
                    // the first with a usage (Anthropic's message_start has the input tokens).
                    if (event.find("\"usage\"") != event.npos || event.find("\"timings\"") != event.npos) {
                        last = event;
                        if (first_usage.empty()) first_usage.assign(event);
                    }
                }
                if (tr) batch += tr->event(event);
            }
            if (!last.empty()) last_data.assign(last);
            // Untranslated, the events of this read leave as they came: one run of the framer's bytes.
            if (co_await write_body(tr ? std::string_view(batch) : framer.complete())) {
                st->client_gone = true;
                co_return gone_or_answered();
            }
            answered = answered || is_final_event(read_events.back());
        }
        keep_upstream();
        st->finish();
        take_stream_usage();
        std::string rest = framer.take_rest();
        if (tr) rest = (rest.empty() ? std::string() : tr->event(rest)) + tr->end();
        if (!rest.empty()) co_await write_body(rest);
        if (!chunked) co_return false;  // HTTP/1.0: the end of the stream is the end of the connection
        const auto lec = co_await core::io_now::write(client, bhttp::make_chunk_last(), kClientWriteTimeout);
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
        if (auto* t = shape()) {
            rec.status = t->error_status(*err);
            co_await write_json(client, v, keep, rec.status, t->error_body(*err), err->retry_after_s());
        } else {
            rec.status = static_cast<unsigned>(status_of(err->kind()));
            co_await write_error(client, v, keep, *err);
        }
        co_return keep;
    }
    // Mid-stream: an SSE error event (or the translation's error line), then a clean end of the body.
    spdlog::warn("stream of '{}' ended by error: {}", lease.valid() ? lease.model() : rec.model, err->what());
    const std::string ev = shape() ? shape()->stream_error(*err) : sse_error_event(*err);
    co_await write_body(ev);
    if (chunked) co_await core::io_now::write(client, bhttp::make_chunk_last(), kClientWriteTimeout);
    co_return false;
}

}  // namespace loch::http
