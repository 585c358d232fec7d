// http/server — loch's HTTP front: one acceptor and one coroutine per connection on the io_context (no
// thread per connection). Routes (http/router.hpp) to the admin handlers and the OpenAI proxy; every error,
// wherever it is thrown, leaves through http/errors.hpp.
//
// The proxy (http/proxy.cpp) relays the engine's response as it arrives: a streamed (SSE) response is
// forwarded event by event, never buffered whole. Before anything is sent to the engine the request is
// checked against the slot context. An engine that dies mid-request gives a 502 JSON if nothing was sent yet,
// otherwise an SSE `error` event and a clean end of the stream. A client that disconnects closes the
// upstream connection (the engine cancels its task). Watchdog: a stream whose engine sends nothing for the
// model's `watchdog` ends with watchdog_timeout; an engine that stops answering its health check for that
// long is killed by its own health watch (engines/engine), and a request in flight on it ends with
// watchdog_timeout and the exit report.
//
// Body limits per route: max_body, the largest max_upload for the multipart upload routes, max_batch_file for
// POST /v1/files (whose body goes to disk as it arrives, http/batch_api_files.cpp); a declared length over
// its route's limit is refused (413) from the header, before the body is read.
//
// Connection hygiene: a keep-alive connection idle for idle_timeout is closed; a request's header must
// arrive within header_timeout of its first byte and its body within body_timeout (else 408 and close:
// slowloris clients cannot hold loch); beyond max_connections a new connection gets 503
// too_many_connections and is closed. HTTP/1.0 clients get no chunked encoding (a stream ends with the
// connection). The accept loop backs off on EMFILE/ENFILE and says so once per interval.
//
// Shutdown (drain(), then wait_closed()): stop accepting, close idle connections, give running requests
// `grace` to finish, then end each one with a `shutting_down` error (an SSE error event and a clean end in a
// stream, a JSON 503 otherwise) — never a cut stream.
#pragma once

#include <array>
#include <chrono>
#include <cstdint>
#include <filesystem>
#include <list>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include <boost/asio/any_completion_handler.hpp>
#include <boost/asio/any_io_executor.hpp>
#include <boost/asio/as_tuple.hpp>
#include <boost/asio/awaitable.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/thread_pool.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <boost/beast/core/flat_buffer.hpp>
#include <boost/beast/core/tcp_stream.hpp>
#include <boost/beast/http/message.hpp>
#include <boost/beast/http/parser.hpp>
#include <boost/beast/http/string_body.hpp>

#include "batch/input_file.hpp"
#include "broker/broker.hpp"
#include "core/http_pool.hpp"
#include "http/admin_api.hpp"
#include "http/batch_api.hpp"
#include "http/ollama_api.hpp"
#include "http/openai_request.hpp"
#include "http/request_journal.hpp"
#include "http/respond.hpp"
#include "http/router.hpp"
#include "http/server_options.hpp"
#include "http/translation.hpp"
#include "observe/loop_lag.hpp"
#include "observe/metrics.hpp"
#include "observe/request_log.hpp"

namespace loch::http {

struct RelayState;

// What a relay reads its engine's answer into, kept with the client connection from one request to the next
// (two 16 KiB blocks allocated and freed per request were a tenth of loch's malloc time).
struct RelayBuffers {
    boost::beast::flat_buffer upstream;  // the engine's bytes as read
    std::array<char, 16 * 1024> body;    // a body piece taken from them by the parser
};

// A client connection's state across its requests.
//
// Its next read is started early by a relay: while the relay waits on its engine, the read that will take the
// client's next request is already pending, and it is also how loch hears the client hang up (EOF). A
// readiness wait cancelled after each request cost an epoll_ctl and a posted cancellation, and the session's
// own next read a speculative recv that found nothing, on every request (issue 9). The session's buffer is
// left alone while the read is pending; its bytes are committed when the session takes them.
class Connection {
  public:
    Connection(boost::asio::ip::tcp::socket& socket, boost::beast::flat_buffer& buffer)
        : socket_(&socket), buffer_(&buffer), state_(std::make_shared<State>()) {}
    // Starts the next read now, telling `relay` when the client hangs up while it runs. False (not started)
    // when bytes are already buffered (a pipelined request) or a read is pending.
    bool start_next_read(const std::shared_ptr<RelayState>& relay);
    // The next bytes from the client, committed to the buffer: the read started early, or a new one.
    boost::asio::awaitable<boost::system::error_code> next_read();
    // The relay's buffers (made on the first model request of the connection).
    RelayBuffers& relay_buffers() {
        if (!buffers_) buffers_ = std::make_unique<RelayBuffers>();
        return *buffers_;
    }

  private:
    struct State {
        bool pending = false, completed = false;
        boost::system::error_code ec;
        std::size_t n = 0;
        std::weak_ptr<RelayState> relay;
        // (In an optional: Boost 1.81's any_completion_handler move-assignment wraps the handler in another
        // one instead of moving it.)
        std::optional<boost::asio::any_completion_handler<void(boost::system::error_code)>> waiter;
    };
    boost::asio::ip::tcp::socket* socket_;
    boost::beast::flat_buffer* buffer_;
    std::shared_ptr<State> state_;  // shared with the pending read's handler, which may outlive the session
    std::unique_ptr<RelayBuffers> buffers_;
};

// One model request on its way through the proxy.
struct ProxyCall {
    Endpoint endpoint = Endpoint::chat_completions;
    std::string upstream_path;                 // the engine's route
    Translation* translation = nullptr;        // null: the engine's bytes pass untouched
    KeepAlive keep_alive;                      // a request's keep_alive (Ollama)
    std::optional<std::uint64_t> num_ctx;      // checked against the slot context (Ollama)
    observe::RequestRecord* record = nullptr;  // filled as it goes
    Connection* conn = nullptr;                // the client connection (always set): its next read, buffers
};

// One relay's state, shared with the client watch, with shutdown() and with cancel (http/cancel.cpp).
struct RelayState {
    // What GET /loch/requests lists and DELETE /loch/requests/{id} finds.
    std::string id, model, route;
    std::chrono::steady_clock::time_point since = std::chrono::steady_clock::now();
    bool granted = false;     // it holds a slot: the engine has (or is about to get) the request
    bool cancellable = true;  // granted: its engine stops a request whose connection closes
    bool done = false;
    bool client_gone = false;
    bool silent = false;  // a stream's watchdog fired: the engine sent nothing for the model's `watchdog`
    std::optional<broker::Error> abort;  // shutdown: end the relay with this error
    std::shared_ptr<boost::beast::tcp_stream> upstream;
    boost::asio::ip::tcp::socket* watched = nullptr;  // the client socket while a readiness wait watches it
    void close_upstream();
    void finish();  // done: close the upstream socket now, stop watching the client
};

class Server {
  public:
    Server(boost::asio::any_io_executor ex, broker::Broker& broker, ServerOptions options);
    ~Server();

    // Binds and listens; throws std::runtime_error naming the address. Returns the bound port.
    std::uint16_t listen();
    void start();  // accept loop
    void stop();   // stop accepting; open connections finish their request
    // Shutdown, phase 1: stop(), close idle connections, wait up to `grace` for running requests, then
    // tell each relay still running to end with a shutting_down error. Requests still queued in the broker
    // get theirs from Broker::shutdown(), which runs between the two phases.
    boost::asio::awaitable<void> drain(std::chrono::milliseconds grace);
    // Phase 2: completes when every relay has ended (≤ 5 s) and every connection is closed (≤ 2 s more).
    boost::asio::awaitable<void> wait_closed();
    std::size_t connections() const { return sessions_.size(); }
    // The model requests in flight (GET /loch/requests, /loch/status "in_flight"): id, model, route, queued
    // or running, for how long, whether a cancel can stop it.
    nlohmann::json in_flight() const;
    // DELETE /loch/requests/{id}, `loch cancel ID` (http/cancel.cpp): ends every request in flight with
    // that id — a queued one leaves the queue, a running one's engine connection is closed (llama-server
    // and whisper-server stop its task) — with a `cancelled` error to its client; else a hold with that id
    // is cancelled. Throws not_found (nothing in flight by that id) and not_cancellable (only requests
    // whose engine cannot stop what it started: a running sd-server generation).
    nlohmann::json cancel(const std::string& id);
    // A reload (SIGHUP): the keys apply to the next request.
    void set_api_keys(std::vector<std::string> keys) { options_.api_keys = std::move(keys); }
    std::uint16_t port() const { return port_; }
    // The unfinished batches' progress (loch status, the dashboard), empty without a Batch API.
    nlohmann::json batches() const { return batch_api_.batches(); }

    using Request = boost::beast::http::request<boost::beast::http::string_body>;

  private:
    boost::asio::awaitable<void> accept_loop();
    boost::asio::awaitable<void> session(boost::asio::ip::tcp::socket socket);
    boost::asio::awaitable<bool> handle(boost::beast::tcp_stream& stream, Request& req, Connection& conn);
    boost::asio::awaitable<bool> dispatch(boost::beast::tcp_stream& stream, Request& req, const Route& r,
                                          unsigned& status, std::string& error_type, Connection& conn);
    boost::asio::awaitable<bool> proxy(boost::beast::tcp_stream& stream, Request& req, ProxyCall call);
    // A model request of either API: the proxy, then its record to the request log and the metrics.
    boost::asio::awaitable<bool> model_request(boost::beast::tcp_stream& stream, Request& req, const Route& r,
                                               Connection& conn);
    boost::asio::awaitable<bool> ollama_request(boost::beast::tcp_stream& stream, Request& req,
                                                const Route& r, observe::RequestRecord& rec,
                                                Connection& conn);
    // Waits for a slot, sending a streaming client SSE comments (and loch.progress events when it asked)
    // while it waits; `headers_sent` says whether the SSE head went out. nullopt: the client left.
    boost::asio::awaitable<std::optional<broker::Lease>> acquire_with_heartbeat(
        boost::beast::tcp_stream& client, unsigned version, const std::string& model,
        const broker::RequestNeeds& needs, bool progress_events, bool& headers_sent);
    // Ends a running request whose engine can stop it, for an interactive request (the runner requeues it).
    bool preempt(const std::string& id);
    boost::asio::awaitable<bool> dashboard(boost::beast::tcp_stream& stream, const Request& req);
    boost::asio::awaitable<bool> follow_log(boost::beast::tcp_stream& stream, const Request& req,
                                            const Route& r);
    boost::asio::awaitable<void> check_request(const broker::Lease& lease, const OpenAIRequest& r);
    void close_idle();
    std::string describe_activity() const;  // for the event loop's lag warning
    nlohmann::json connection_figures() const;

    struct Session {
        boost::beast::tcp_stream* stream = nullptr;
        bool busy = false;  // a request is being handled (not waiting for the next one)
        std::chrono::steady_clock::time_point idle_since{};
        bool shed = false;    // closed to make room for a new connection
        bool served = false;  // has answered a request: a keep-alive connection between requests
    };
    // At the connection cap: closes the keep-alive connection idle the longest (Envoy's overload manager
    // does the same), so that idle connections never keep a client with a request out. Never one whose
    // request bytes have arrived unread, nor a new connection before its client had a second to send (a
    // burst of new clients would otherwise close each other's connections before their requests are read).
    // False when no connection qualifies.
    bool shed_longest_idle(const Session* except);
    // Unregisters on destruction (RAII): a relay or session can never be left in the registry.
    template <class T>
    struct Registration {
        std::list<T>* list = nullptr;
        typename std::list<T>::iterator it;
        Registration() = default;
        Registration(std::list<T>& l, T value) : list(&l), it(l.insert(l.end(), std::move(value))) {}
        Registration(const Registration&) = delete;
        Registration& operator=(const Registration&) = delete;
        ~Registration() {
            if (list) list->erase(it);
        }
    };
    Registration<std::weak_ptr<RelayState>> register_relay(const std::shared_ptr<RelayState>& st) {
        return {relays_, st};
    }
    std::list<Session> sessions_;
    std::list<std::weak_ptr<RelayState>> relays_;
    bool shutting_down_ = false;

    boost::asio::any_io_executor ex_;
    broker::Broker& broker_;
    ServerOptions options_;
    boost::asio::ip::tcp::acceptor acceptor_;
    core::HttpPool pool_{ex_};  // keep-alive connections to the engines (core/http_pool.hpp)
    observe::Metrics metrics_;
    RequestJournal journal_;  // ids, the request log, a model request's metrics (http/request_journal.hpp)
    std::uint16_t port_ = 0;
    std::uint64_t shed_connections_ = 0;  // idle connections closed at the cap
    observe::LoopLag loop_lag_;
    AdminApi admin_;      // the routes that answer from what loch knows (http/admin_api.hpp)
    BatchApi batch_api_;  // the Batch API's files and batches (http/batch_api.hpp)
    std::shared_ptr<bool> alive_;
};

}  // namespace loch::http
