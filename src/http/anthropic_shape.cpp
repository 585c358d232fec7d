#include "http/anthropic_shape.hpp"

#include "core/json_text.hpp"
#include "http/errors.hpp"

namespace loch::http {

using broker::ErrorKind;

unsigned anthropic_status(const broker::Error& e) {
    switch (e.kind()) {
        case ErrorKind::queue_timeout:
        case ErrorKind::shutting_down:
            return 529;
        default:
            return static_cast<unsigned>(status_of(e.kind()));
    }
}

std::string anthropic_error_type(const broker::Error& e) {
    switch (anthropic_status(e)) {
        case 400:
        case 405:
        case 409:
            return "invalid_request_error";
        case 401:
            return "authentication_error";
        case 403:
            return "permission_error";
        case 404:
            return "not_found_error";
        case 413:
            return "request_too_large";
        case 429:
            return "rate_limit_error";
        case 504:
            return "timeout_error";
        case 529:
            return "overloaded_error";
        default:
            return "api_error";
    }
}

nlohmann::json anthropic_error_body(const broker::Error& e) {
    nlohmann::json body = error_body(e);
    auto& err = body["error"];
    err["loch_type"] = err["type"];
    err["type"] = anthropic_error_type(e);
    return body;
}

void AnthropicShape::reshape(nlohmann::json& message) const {
    if (!message.is_object()) return;
    if (const auto id = message.find("id"); id != message.end() && id->is_string()) {
        const auto& text = id->get_ref<const std::string&>();
        if (text.starts_with("chatcmpl-")) *id = "msg_" + text.substr(9);
    }
    if (model_ && message.contains("model")) message["model"] = *model_;
}

std::string AnthropicShape::answer(std::string_view engine_body, unsigned status) {
    if (status >= 300) return std::string(engine_body);
    auto j = nlohmann::json::parse(engine_body, nullptr, false);
    if (!j.is_object() || !j.contains("id")) return std::string(engine_body);
    reshape(j);
    return core::json_text(j);
}

std::string AnthropicShape::event(std::string_view sse_event) {
    // Only message_start carries the message's id and model; every other event passes as it came.
    if (sse_event.find("message_start") == std::string_view::npos) return std::string(sse_event);
    auto j = sse_json(sse_event);
    if (!j || !j->is_object() || j->value("type", "") != "message_start" || !j->contains("message"))
        return std::string(sse_event);
    reshape((*j)["message"]);
    return "event: message_start\ndata: " + core::json_text(*j) + "\n\n";
}

std::string AnthropicShape::stream_error(const broker::Error& e) const {
    return "event: error\ndata: " + core::json_text(anthropic_error_body(e)) + "\n\n";
}

nlohmann::json AnthropicShape::error_body(const broker::Error& e) const {
    return anthropic_error_body(e);
}

unsigned AnthropicShape::error_status(const broker::Error& e) const {
    return anthropic_status(e);
}

}  // namespace loch::http
