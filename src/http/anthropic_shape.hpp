// http/anthropic_shape — answers on Anthropic's routes (/v1/messages, /v1/messages/count_tokens) in the shape
// Anthropic's clients (the SDKs, Claude Code) expect of the cloud: message ids `msg_…` (the engine says
// `chatcmpl-…`), and errors as {"type":"error","error":{"type":"<anthropic type>","message":…}} with
// Anthropic's statuses — 529 overloaded_error when loch is too busy to take the request in time, which
// Claude Code retries with backoff. loch's own type stays in the body (`loch_type`), with the numbers.
#pragma once

#include <optional>
#include <string>

#include "http/translation.hpp"

namespace loch::http {

// Anthropic's error type for loch's error (its HTTP status decides, as Anthropic's API documents them).
std::string anthropic_error_type(const broker::Error& e);
// The status Anthropic's clients expect: 529 where loch waited too long or is shutting down, else loch's.
unsigned anthropic_status(const broker::Error& e);
nlohmann::json anthropic_error_body(const broker::Error& e);

// The engine's Messages answer with Anthropic's ids; `model` (when set) replaces the name the engine gives
// (a command engine that names its model itself).
class AnthropicShape : public Translation {
  public:
    explicit AnthropicShape(std::optional<std::string> model = std::nullopt) : model_(std::move(model)) {}
    std::string answer(std::string_view engine_body, unsigned status) override;
    std::string event(std::string_view sse_event) override;
    std::string stream_error(const broker::Error& e) const override;
    nlohmann::json error_body(const broker::Error& e) const override;
    unsigned error_status(const broker::Error& e) const override;

  private:
    void reshape(nlohmann::json& message) const;
    std::optional<std::string> model_;
};

}  // namespace loch::http
