// responses/shape — OpenAI's Responses API as its spec and SDKs define it, made from what the engine sends
// (llama-server's /v1/responses, which leaves out what its own clients do not read): pure functions of JSON,
// so that every field is unit-tested without an engine.
//   - the Response object: the request's settings echoed (instructions, tools, temperature, store, …), the
//     configured model name, previous_response_id;
//   - stream events: sequence_number on every one, output_index / content_index on every item event, a
//     whole Response in response.created, in_progress and completed (the openai SDK's responses.stream()
//     indexes its snapshot by them);
//   - multi-turn: a stored response's conversation (its input items and output) put before the new input,
//     so that `previous_response_id` works on any engine.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>

#include <nlohmann/json.hpp>

namespace loch::responses {

// `input` (a string or a list of items) as a list of items, each with its `type`; string contents become
// [{"type":"input_text","text":…}] (assistant messages: output_text) — the shape input_items lists and the
// engine reads.
nlohmann::json input_items(const nlohmann::json& input);

// The items a later turn starts from: the earlier context, then this response's output as input items
// (messages and function calls without their ids and statuses; reasoning that carries its text).
nlohmann::json next_context(const nlohmann::json& context, const nlohmann::json& response);

// The Response object's fields that echo the request (`model`: the configured name; `previous`: the
// previous_response_id the client sent, which the engine never sees).
nlohmann::json echoed_fields(const nlohmann::json& request, const std::string& model,
                             const std::string& previous);

// The engine's finished Response with every field OpenAI's has (the engine's output, usage and id kept).
nlohmann::json complete_response(nlohmann::json engine_response, const nlohmann::json& echoed,
                                 std::int64_t now);

// The engine's stream, event by event, in OpenAI's shape.
class EventShaper {
  public:
    EventShaper(nlohmann::json echoed, std::int64_t created_at)
        : echoed_(std::move(echoed)), created_at_(created_at) {}
    // One event's data → the same event with OpenAI's fields (the engine's own ones kept).
    nlohmann::json shape(nlohmann::json event);
    // The Response of response.completed, once it passed.
    const std::optional<nlohmann::json>& completed() const { return completed_; }

  private:
    int index_of(const std::string& item_id);
    nlohmann::json response_so_far(const nlohmann::json& engine_response, const char* status) const;
    nlohmann::json echoed_;
    std::int64_t created_at_;
    std::uint64_t sequence_ = 0;
    std::map<std::string, int> output_index_;  // item id → its place in `output`
    nlohmann::json output_ = nlohmann::json::array();
    std::optional<nlohmann::json> completed_;
};

}  // namespace loch::responses
