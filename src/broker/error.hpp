// broker/error — the one error type of the request path. The broker and the HTTP layer throw it; the HTTP
// layer renders it in one place (http/errors.hpp) into {"error":{"type","message",...numbers}} with the
// status that belongs to its kind. Details carry the numbers (bytes, tokens, seconds), never prose only.
#pragma once

#include <optional>
#include <stdexcept>
#include <string>
#include <string_view>

#include <nlohmann/json.hpp>

namespace loch::broker {

enum class ErrorKind {
    invalid_request,          // malformed JSON, missing/ill-typed fields
    context_length_exceeded,  // prompt + max_tokens > slot context
    unauthorized,             // API key missing or wrong
    not_found,                // no such endpoint
    method_not_allowed,
    model_not_found,       // unknown model name or alias
    request_too_large,     // body over the configured limit
    request_timeout,       // the client sent its request too slowly (header or body deadline)
    too_many_connections,  // loch's connection cap is reached
    insufficient_memory,   // cannot fit even on an empty allowed device
    queue_full,            // too many requests already waiting in this priority class
    queue_timeout,         // waited longer than max_wait
    quarantined,           // the model keeps crashing; refused until the quarantine ends
    shutting_down,         // loch is stopping
    engine_failed,         // the engine died, refused the connection or failed to start
    engine_missing,        // no engine build here reaches the model's devices (setup.sh --backend builds one)
    watchdog_timeout,      // the engine sent nothing for the watchdog period
    cancelled,             // ended by `loch cancel` / DELETE /loch/requests/{id}
    not_cancellable,       // a cancel of what cannot stop (a generation sd-server has started)
    conflict,              // the thing's state forbids it (cancel a batch that ended, delete a file in use)
    insufficient_storage,  // the disk loch writes to is full (an upload): the user's to free, not a bug
    internal,              // a bug in loch: the message says what failed
};
std::string_view to_string(ErrorKind k);                           // also the JSON "type"
std::optional<ErrorKind> error_kind_named(std::string_view type);  // to_string's inverse

class Error : public std::runtime_error {
  public:
    Error(ErrorKind kind, std::string message, nlohmann::json details = nlohmann::json::object(),
          std::optional<int> retry_after_s = std::nullopt)
        : std::runtime_error(std::move(message)),
          kind_(kind),
          details_(std::move(details)),
          retry_after_s_(retry_after_s) {}

    ErrorKind kind() const { return kind_; }
    const nlohmann::json& details() const { return details_; }
    std::optional<int> retry_after_s() const { return retry_after_s_; }

  private:
    ErrorKind kind_;
    nlohmann::json details_;
    std::optional<int> retry_after_s_;
};

}  // namespace loch::broker
