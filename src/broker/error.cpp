#include "broker/error.hpp"

namespace loch::broker {

std::string_view to_string(ErrorKind k) {
    switch (k) {
        case ErrorKind::invalid_request:
            return "invalid_request";
        case ErrorKind::context_length_exceeded:
            return "context_length_exceeded";
        case ErrorKind::unauthorized:
            return "unauthorized";
        case ErrorKind::not_found:
            return "not_found";
        case ErrorKind::method_not_allowed:
            return "method_not_allowed";
        case ErrorKind::model_not_found:
            return "model_not_found";
        case ErrorKind::request_too_large:
            return "request_too_large";
        case ErrorKind::request_timeout:
            return "request_timeout";
        case ErrorKind::too_many_connections:
            return "too_many_connections";
        case ErrorKind::insufficient_memory:
            return "insufficient_memory";
        case ErrorKind::queue_full:
            return "queue_full";
        case ErrorKind::queue_timeout:
            return "queue_timeout";
        case ErrorKind::quarantined:
            return "quarantined";
        case ErrorKind::shutting_down:
            return "shutting_down";
        case ErrorKind::engine_failed:
            return "engine_failed";
        case ErrorKind::watchdog_timeout:
            return "watchdog_timeout";
        case ErrorKind::cancelled:
            return "cancelled";
        case ErrorKind::not_cancellable:
            return "not_cancellable";
        case ErrorKind::conflict:
            return "conflict";
        case ErrorKind::insufficient_storage:
            return "insufficient_storage";
        case ErrorKind::engine_missing:
            return "engine_missing";
        case ErrorKind::internal:
            return "internal_error";
    }
    return "error";
}

std::optional<ErrorKind> error_kind_named(std::string_view type) {
    for (int k = 0; k <= static_cast<int>(ErrorKind::internal); ++k)
        if (to_string(static_cast<ErrorKind>(k)) == type) return static_cast<ErrorKind>(k);
    return std::nullopt;
}

}  // namespace loch::broker
