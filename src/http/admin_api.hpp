// http/admin_api — the routes that answer from what loch knows, without a model's engine: loch's own API
// (/loch/status, plan, the engine log's tail, load and unload, holds, the requests in flight and their
// cancel), /metrics, /health, the model lists (OpenAI's /v1/models, Ollama's tags, ps, show and version,
// A1111's sd-models) and the refusals of what loch does not do (Ollama's pull). A handler: it returns the
// answer and throws broker::Error for a refusal; the server writes either in the route's shape. The routes
// that own their connection (model requests, files, batches, the dashboard, a followed log) are not its.
#pragma once

#include <functional>
#include <optional>
#include <string>

#include <boost/asio/awaitable.hpp>
#include <boost/beast/http/message.hpp>
#include <boost/beast/http/string_body.hpp>
#include <nlohmann/json.hpp>

#include "broker/broker.hpp"
#include "http/router.hpp"
#include "observe/metrics.hpp"

namespace loch::http {

// An answer: JSON, or text of its content type (the metrics exposition).
struct Reply {
    unsigned status = 200;
    nlohmann::json body;
    std::optional<std::string> text;
    std::string content_type;
};

class AdminApi {
  public:
    // What only the server knows, for /loch/status and /metrics.
    struct ServerSide {
        std::function<nlohmann::json()> in_flight;                    // the model requests in flight
        std::function<nlohmann::json()> batches;                      // the unfinished batches' progress
        std::function<nlohmann::json()> event_loop;                   // how late the loop wakes
        std::function<nlohmann::json()> connections;                  // client connections
        std::function<nlohmann::json()> upstream;                     // kept engine connections
        std::function<nlohmann::json(const std::string& id)> cancel;  // DELETE /loch/requests/{id}
    };
    AdminApi(broker::Broker& broker, observe::Metrics& metrics, ServerSide server);

    // Whether `r` is one of its routes.
    static bool answers(const Route& r);
    using Request = boost::beast::http::request<boost::beast::http::string_body>;
    boost::asio::awaitable<Reply> answer(const Request& req, const Route& r);

  private:
    boost::asio::awaitable<Reply> hold_route(const Request& req, const Route& r);

    broker::Broker& broker_;
    observe::Metrics& metrics_;
    ServerSide server_;
};

}  // namespace loch::http
