// batch/streamed_answer — a batch item's chat or text completion goes to the engine streamed, and its whole
// answer is put together here from the chunks, as OpenAI's non-streamed object for the output file.
//
// Why streamed: a preempted item must stop at once for the person it yields to. llama-server notices that a
// non-streamed request's connection closed only at its next one-second poll (HTTP_POLLING_SECONDS), and by
// then a short item has usually finished — its work lost and the person's request slowed all the same; a
// streamed one stops at its next token. The assembly follows llama-server's own non-streamed answer
// (tools/server/server-task.cpp, to_json_oaicompat_chat / to_json_oaicompat): the message's content and
// reasoning joined, tool calls joined by index, logprobs appended, the last chunk's usage and timings.
#pragma once

#include <map>
#include <optional>
#include <string>
#include <string_view>

#include <nlohmann/json.hpp>

namespace loch::batch {

// Whether an item to this route goes to the engine streamed (chat and text completions).
bool streams_item(std::string_view url);
// The item's body as sent: streamed, with the usage in the last chunk.
void ask_streamed(nlohmann::json& body);

class StreamedAnswer {
  public:
    explicit StreamedAnswer(std::string_view url);

    // One chunk's JSON, in order. A chunk with an "error" object (the engine's, or loch's own when it ended
    // the stream: a preemption, a watchdog, the engine's death) ends the answer as that error.
    void add(const nlohmann::json& chunk);
    // Whether every choice has had its finish_reason (the engine ended the answer itself).
    bool finished() const;
    const std::optional<nlohmann::json>& error() const { return error_; }  // {"error":{...}}
    // The non-streamed answer.
    nlohmann::json answer() const;

  private:
    struct ToolCall {
        std::string id, name, arguments;
    };
    struct Choice {
        std::string content, reasoning;
        nlohmann::json finish_reason;  // null until the engine ends the choice
        nlohmann::json logprobs = nlohmann::json::array();
        std::map<std::size_t, ToolCall> tool_calls;
    };
    bool chat_;
    std::map<std::size_t, Choice> choices_;
    nlohmann::json top_ = nlohmann::json::object();  // id, created, model, system_fingerprint, usage, timings
    std::optional<nlohmann::json> error_;
};

}  // namespace loch::batch
