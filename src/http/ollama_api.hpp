// http/ollama_api — Ollama's generation routes over the engines' OpenAI endpoints: /api/chat and
// /api/generate become /v1/chat/completions (or /v1/completions for `raw`), /api/embed and /api/embeddings
// become /v1/embeddings; their answers go back in Ollama's shape, streamed as NDJSON lines (Ollama streams
// by default). Pure: a body in, the OpenAI body and a Translation out; bad input throws
// broker::Error(invalid_request) naming the field.
//
// Mapped: messages (with `images` as image parts), prompt/system, options (num_predict → max_tokens, the
// sampling options by their names; num_ctx is checked against the slot context, not passed), format
// ("json" or a JSON schema → response_format), tools and non-streamed tool calls (arguments as objects),
// keep_alive ("5m", seconds, negative = forever, 0 = unload when idle) onto loch's keep-alive. An empty
// prompt / message list only loads the model, or unloads it with keep_alive 0 (as Ollama does).
// Not mapped: `suffix`, `context`, `template`, `think`, streamed tool calls.
#pragma once

#include <chrono>
#include <memory>
#include <optional>
#include <string>
#include <string_view>

#include "http/openai_request.hpp"
#include "http/translation.hpp"

namespace loch::http {

using KeepAlive = std::optional<std::optional<std::chrono::seconds>>;  // unset / forever / seconds

struct OllamaCall {
    Endpoint endpoint = Endpoint::chat_completions;  // where the OpenAI body goes
    std::string model;
    std::string body;  // the OpenAI request
    bool stream = true;
    KeepAlive keep_alive;
    std::optional<std::uint64_t> num_ctx;
    enum class Only { none, load, unload } only = Only::none;  // an empty prompt: load / unload only
    std::unique_ptr<Translation> translation;
};

// `path` is /api/chat, /api/generate, /api/embed or /api/embeddings.
OllamaCall translate_ollama(std::string_view path, std::string_view body);

// Ollama's keep_alive: a duration string ("10m", "1h30m", "30s", "-1"), a number of seconds, or null.
KeepAlive parse_keep_alive(const nlohmann::json& v);

// The answer to a load-only or unload-only call.
nlohmann::json ollama_load_answer(std::string_view path, const std::string& model, bool unloaded);

// /api/show for one model of /loch/status (nullopt: no such model).
std::optional<nlohmann::json> ollama_show(const nlohmann::json& status, const std::string& model);

}  // namespace loch::http
