// cli/client — the client side of `loch ps|status|logs|load|unload`: one HTTP exchange with a running
// `loch serve` (Beast on a private io_context), or a followed SSE stream. loch's JSON errors become
// std::runtime_error with loch's own message.
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <string>

#include <nlohmann/json.hpp>

namespace loch::cli {

struct ServerAddress {
    std::string host = "127.0.0.1";
    std::uint16_t port = 8080;
    std::string api_key;
};

// "http://127.0.0.1:8080", "127.0.0.1:8080" or "localhost:9000"; throws std::invalid_argument.
ServerAddress parse_url(const std::string& url);

// One exchange: status 0 when loch was not reached (`error` says why); `json` is null when the body is not
// JSON. message() is loch's error.message (or the transport error) for printing.
struct LochReply {
    unsigned status = 0;
    nlohmann::json json;
    std::string body, error;
    std::string message() const;
};
LochReply exchange_loch(const ServerAddress& to, const std::string& method, const std::string& target,
                        const std::string& body, std::chrono::seconds timeout = std::chrono::seconds(30));

// The JSON answer of `method target`; throws std::runtime_error when loch is unreachable or answers an
// error (its error.message, with the status).
nlohmann::json call_loch(const ServerAddress& to, const std::string& method, const std::string& target,
                         std::chrono::seconds timeout = std::chrono::seconds(30));

// Reads an SSE stream and hands each `data:` payload (JSON-decoded when it is a JSON string) to `on_data`
// until the server ends it.
void follow_loch(const ServerAddress& to, const std::string& target,
                 const std::function<void(const std::string&)>& on_data);

}  // namespace loch::cli
