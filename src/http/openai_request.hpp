// http/openai_request — reads just what loch needs from an OpenAI-style request body: which model, whether
// it streams, how many tokens it may generate, and the prompt text (to check it against the slot context).
// Everything else is passed to the engine untouched. Bad input throws broker::Error(invalid_request) that
// says which field is wrong; it never crashes (fuzzed: fuzz/fuzz_openai_request.cpp).
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include "engines/image_input.hpp"

namespace loch::http {

enum class Endpoint {
    chat_completions,
    completions,
    embeddings,
    image_generations,
    image_edits,
    sdapi_txt2img,
    audio_transcriptions,
    audio_translations,
    audio_speech,
    responses,           // OpenAI's Responses API (Codex, the Agents SDK)
    anthropic_messages,  // Anthropic's Messages API (Claude Code and the anthropic SDKs)
    rerank,              // llama-server's reranking (Jina/Cohere shape)
    // Token counts of a request, by the engine's tokenizer, nothing generated: Anthropic's
    // POST /v1/messages/count_tokens and OpenAI's POST /v1/responses/input_tokens.
    anthropic_count_tokens,
    responses_input_tokens
};
std::string_view to_string(Endpoint e);  // its path: "/v1/chat/completions" (http/routes.hpp has the table)

struct OpenAIRequest {
    Endpoint endpoint = Endpoint::chat_completions;
    // The parsed object, forwarded as-is; for a multipart body (image edits, audio), its text fields as
    // strings (numbers as numbers) and each file as {"file_bytes": n, "filename", and what its header says:
    // "width"/"height" of an image, "seconds" of a WAV} — the body forwarded is the client's.
    nlohmann::json body;
    std::string model;
    bool stream = false;
    std::optional<std::uint64_t> max_tokens;  // max_tokens | max_completion_tokens | n_predict (≥ 0)
    std::uint64_t prompt_bytes = 0;      // UTF-8 bytes of all prompt text (messages' text, prompt, input)
    std::uint64_t prompt_token_ids = 0;  // prompts already given as token ids count exactly
    std::vector<engines::ImageInput> images;  // chat's inline images (data URLs), as their headers say
};

// Throws broker::Error(invalid_request). `content_type` matters for the multipart routes.
OpenAIRequest parse_openai_request(Endpoint endpoint, std::string_view body,
                                   std::string_view content_type = "application/json");

}  // namespace loch::http
