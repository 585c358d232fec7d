// http/model_proxy — the handler of every model request, of both APIs (OpenAI's routes, Ollama's over them):
// each gets an id and a record (model_request.cpp), then goes through the proxy's phases (proxy.cpp) —
// parse and check the body, admit (the broker's lease, with a streaming client kept warm by SSE comments
// and progress while it waits), check it against the slot context, relay the engine's answer event by
// event — and ends with one line in the request log and its metrics.
//
// The relay sends the engine's response as it arrives: a streamed (SSE) response is forwarded event by
// event, never buffered whole. An engine that dies mid-request gives a 502 JSON if nothing was sent yet,
// otherwise an SSE `error` event and a clean end of the stream. A client that disconnects closes the
// upstream connection (the engine cancels its task). Watchdog: a stream whose engine sends nothing for the
// model's `watchdog` ends with watchdog_timeout; an engine that stops answering its health check for that
// long is killed by its own health watch (engines/engine), and a request in flight on it ends with
// watchdog_timeout and the exit report.
#pragma once

#include <cstdint>
#include <optional>
#include <string>

#include <boost/asio/any_io_executor.hpp>
#include <boost/asio/awaitable.hpp>
#include <boost/beast/core/tcp_stream.hpp>
#include <boost/beast/http/message.hpp>
#include <boost/beast/http/string_body.hpp>

#include "broker/broker.hpp"
#include "core/http_pool.hpp"
#include "http/connection.hpp"
#include "http/ollama_api.hpp"
#include "http/openai_request.hpp"
#include "http/relays.hpp"
#include "http/request_journal.hpp"
#include "http/responses_api.hpp"
#include "http/router.hpp"
#include "http/server_options.hpp"
#include "http/translation.hpp"
#include "observe/request_record.hpp"

namespace loch::http {

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

class ModelProxy {
  public:
    using Request = boost::beast::http::request<boost::beast::http::string_body>;

    // `options` and `pool` are the server's (a reload changes its keys, the pool outlives every relay).
    // `responses`: the Responses API's store (POST /v1/responses is reshaped and kept through it).
    ModelProxy(boost::asio::any_io_executor ex, broker::Broker& broker, core::HttpPool& pool,
               RequestJournal& journal, const ServerOptions& options, Relays& relays, ResponsesApi& responses)
        : ex_(ex),
          broker_(broker),
          pool_(pool),
          journal_(journal),
          options_(options),
          relays_(relays),
          responses_(responses) {}

    // A model request of either API: the proxy, then its record to the request log and the metrics. Whether
    // the connection stays open.
    boost::asio::awaitable<bool> model_request(boost::beast::tcp_stream& stream, Request& req, const Route& r,
                                               Connection& conn);

  private:
    boost::asio::awaitable<bool> ollama_request(boost::beast::tcp_stream& stream, Request& req,
                                                const Route& r, observe::RequestRecord& rec,
                                                Connection& conn);
    boost::asio::awaitable<bool> proxy(boost::beast::tcp_stream& stream, Request& req, ProxyCall call);
    // Waits for a slot, sending a streaming client SSE comments (and loch.progress events when it asked)
    // while it waits; `headers_sent` says whether the SSE head went out. nullopt: the client left.
    boost::asio::awaitable<std::optional<broker::Lease>> acquire_with_heartbeat(
        boost::beast::tcp_stream& client, unsigned version, const std::string& model,
        const broker::RequestNeeds& needs, bool progress_events, bool& headers_sent);
    boost::asio::awaitable<void> check_request(const broker::Lease& lease, const OpenAIRequest& r);

    boost::asio::any_io_executor ex_;
    broker::Broker& broker_;
    core::HttpPool& pool_;
    RequestJournal& journal_;
    const ServerOptions& options_;
    Relays& relays_;
    ResponsesApi& responses_;
};

}  // namespace loch::http
