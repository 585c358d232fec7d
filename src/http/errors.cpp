#include "http/errors.hpp"
#include "core/json_text.hpp"

namespace loch::http {

namespace beast_http = boost::beast::http;
using broker::ErrorKind;

beast_http::status status_of(ErrorKind kind) {
    switch (kind) {
        case ErrorKind::invalid_request:
        case ErrorKind::context_length_exceeded:
            return beast_http::status::bad_request;
        case ErrorKind::unauthorized:
            return beast_http::status::unauthorized;
        case ErrorKind::not_found:
        case ErrorKind::model_not_found:
            return beast_http::status::not_found;
        case ErrorKind::method_not_allowed:
            return beast_http::status::method_not_allowed;
        case ErrorKind::request_too_large:
            return beast_http::status::payload_too_large;
        case ErrorKind::request_timeout:
            return beast_http::status::request_timeout;
        case ErrorKind::too_many_connections:
            return beast_http::status::service_unavailable;
        // Not the client's fault: the model is larger than this box can hold. 503 (with x-should-retry:
        // false for SDKs) so that a load balancer retries it on another box (docs/broker.md, issue 30).
        case ErrorKind::insufficient_memory:
            return beast_http::status::service_unavailable;
        // Too many requests already wait: the client should slow down and come back (Retry-After).
        case ErrorKind::queue_full:
            return beast_http::status::too_many_requests;
        case ErrorKind::queue_timeout:
        case ErrorKind::quarantined:
        case ErrorKind::shutting_down:
            return beast_http::status::service_unavailable;
        case ErrorKind::engine_failed:
            return beast_http::status::bad_gateway;
        // This box has no engine build for the device (a GPU with only CPU builds): another box may.
        case ErrorKind::engine_missing:
            return beast_http::status::service_unavailable;
        case ErrorKind::watchdog_timeout:
            return beast_http::status::gateway_timeout;
        // The request's own state decided it (docs/broker.md: cancel): retrying the same request is the
        // client's call, and x-should-retry says no.
        case ErrorKind::cancelled:
        case ErrorKind::not_cancellable:
        case ErrorKind::conflict:
            return beast_http::status::conflict;
        case ErrorKind::insufficient_storage:
            return beast_http::status::insufficient_storage;
        case ErrorKind::internal:
            return beast_http::status::internal_server_error;
    }
    return beast_http::status::internal_server_error;
}

nlohmann::json error_body(const broker::Error& e) {
    nlohmann::json err = nlohmann::json::object();
    if (e.details().is_object())
        for (const auto& [k, v] : e.details().items()) err[k] = v;
    err["type"] = std::string(to_string(e.kind()));
    err["message"] = e.what();
    if (e.retry_after_s()) err["retry_after_s"] = *e.retry_after_s();
    // "type": "error" at the top as well: Anthropic's error shape ({"type":"error","error":{type,message}}),
    // which OpenAI's clients ignore — one body that both families of clients read.
    return {{"type", "error"}, {"error", std::move(err)}};
}

std::string sse_error_event(const broker::Error& e) {
    return "event: error\ndata: " + core::json_text(error_body(e)) + "\n\n";
}

}  // namespace loch::http
