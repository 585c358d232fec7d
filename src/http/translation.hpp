// http/translation — the seam for answering in another shape than the engine's OpenAI one. The proxy
// relays the engine's answer through a Translation when the route asks for one: Ollama's API (NDJSON
// lines instead of SSE events, its own field names) and the configured model name in every answer of an
// engine that names its model itself (a `command` engine). Without one, bytes pass untouched.
#pragma once

#include <string>
#include <string_view>

#include <nlohmann/json.hpp>

#include "broker/error.hpp"

namespace loch::http {

class Translation {
  public:
    virtual ~Translation() = default;
    // The client's Content-Type for a streamed answer (a non-streamed one keeps the engine's JSON type).
    virtual std::string stream_content_type() const { return "text/event-stream"; }
    // A whole non-streamed answer (the engine's status alongside).
    virtual std::string answer(std::string_view engine_body, unsigned status) = 0;
    // One complete SSE event of the engine → the client's bytes (may be empty).
    virtual std::string event(std::string_view sse_event) = 0;
    // After the engine's stream ended cleanly: what the client still gets.
    virtual std::string end() { return {}; }
    // An error mid-stream, and the body of one before anything was sent.
    virtual std::string stream_error(const broker::Error& e) const;
    virtual nlohmann::json error_body(const broker::Error& e) const;
    // The HTTP status of an error answered before anything was sent (default: loch's for its kind).
    virtual unsigned error_status(const broker::Error& e) const;
};

// The JSON of an SSE event's data (its `data:` lines joined), if it is JSON; nullopt for comments,
// [DONE] and other text.
std::optional<nlohmann::json> sse_json(std::string_view event);

// Rewrites the top-level "model" of JSON answers and of each streamed chunk to the configured name.
class ModelRename : public Translation {
  public:
    explicit ModelRename(std::string model) : model_(std::move(model)) {}
    std::string answer(std::string_view engine_body, unsigned status) override;
    std::string event(std::string_view sse_event) override;

  private:
    std::string model_;
};

}  // namespace loch::http
