// http/server — loch's HTTP front: one acceptor and one coroutine per connection on the io_context (no
// thread per connection). It keeps the connections and their limits, and hands each request to its route's
// handler (http/router.hpp): the model proxy (http/model_proxy.hpp), the admin API, the Batch API, the
// dashboard. Every error, wherever it is thrown, leaves through http/errors.hpp.
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
#include "http/connection.hpp"
#include "http/dashboard.hpp"
#include "http/model_proxy.hpp"
#include "http/ollama_api.hpp"
#include "http/openai_request.hpp"
#include "http/relays.hpp"
#include "http/request_journal.hpp"
#include "http/respond.hpp"
#include "http/router.hpp"
#include "http/server_options.hpp"
#include "http/translation.hpp"
#include "observe/loop_lag.hpp"
#include "observe/metrics.hpp"
#include "observe/request_log.hpp"

namespace loch::http {

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
    // The model requests in flight and their cancel (http/relays.hpp).
    nlohmann::json in_flight() const { return relays_.in_flight(); }
    nlohmann::json cancel(const std::string& id) { return relays_.cancel(id); }
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
    // HEAD (Claude Code's first request, uptime checks): the GET answer's status and headers without its
    // body, for loch's own pages and reads; 405 where a GET would stream or relay (a model, a file, a
    // followed log).
    boost::asio::awaitable<bool> answer_head(boost::beast::tcp_stream& stream, Request& req, const Route& r,
                                             unsigned& status, std::string& error_type);
    boost::asio::awaitable<bool> dispatch(boost::beast::tcp_stream& stream, Request& req, const Route& r,
                                          unsigned& status, std::string& error_type, Connection& conn);
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
    std::list<Session> sessions_;
    bool shutting_down_ = false;

    boost::asio::any_io_executor ex_;
    broker::Broker& broker_;
    ServerOptions options_;
    boost::asio::ip::tcp::acceptor acceptor_;
    core::HttpPool pool_{ex_};  // keep-alive connections to the engines (core/http_pool.hpp)
    observe::Metrics metrics_;
    RequestJournal journal_;  // ids, the request log, a model request's metrics (http/request_journal.hpp)
    Relays relays_;           // the model requests relayed now (http/relays.hpp)
    std::uint16_t port_ = 0;
    std::uint64_t shed_connections_ = 0;  // idle connections closed at the cap
    observe::LoopLag loop_lag_;
    ResponsesApi responses_;  // the Responses API's stored responses (http/responses_api.hpp)
    ModelProxy proxy_;        // every model request (http/model_proxy.hpp)
    Dashboard dashboard_;     // the page and a followed log (http/dashboard.hpp)
    AdminApi admin_;          // the routes that answer from what loch knows (http/admin_api.hpp)
    BatchApi batch_api_;      // the Batch API's files and batches (http/batch_api.hpp)
    std::shared_ptr<bool> alive_;
};

}  // namespace loch::http
