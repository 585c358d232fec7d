// Fuzzes the Ollama API mapping (http/ollama_api) with arbitrary bytes: a client's request body, then the
// same bytes as the engine's answer and as one of its SSE events, through the translation. The first byte
// picks the route. Any outcome but a crash, a leak or an exception other than broker::Error is a finding.
// fuzz-sources: http/ollama_api.cpp http/ollama.cpp http/translation.cpp http/errors.cpp broker/error.cpp
// fuzz-sources: http/json_body.cpp http/anthropic_shape.cpp
#include <cstddef>
#include <cstdint>
#include <string_view>

#include "broker/error.hpp"
#include "http/anthropic_shape.hpp"
#include "http/ollama_api.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
    if (size == 0) return 0;
    static constexpr std::string_view kPaths[] = {"/api/chat", "/api/generate", "/api/embed",
                                                  "/api/embeddings"};
    const auto path = kPaths[data[0] % 4];
    const std::string_view body(reinterpret_cast<const char*>(data) + 1, size - 1);
    try {
        auto call = loch::http::translate_ollama(path, body);
        if (call.model.empty() || !call.translation) __builtin_trap();  // an accepted call names its model
        auto& t = *call.translation;
        (void)t.answer(body, data[0] % 2 ? 200 : 500);
        (void)t.event(body);
        (void)t.event("data: " + std::string(body) + "\n\n");
        (void)t.end();
    } catch (const loch::broker::Error&) {
    }
    {  // the same bytes as an engine's Messages answer and event, in Anthropic's shape
        loch::http::AnthropicShape shape;
        (void)shape.answer(body, data[0] % 2 ? 200 : 500);
        (void)shape.event(body);
        (void)shape.event("event: message_start\ndata: " + std::string(body) + "\n\n");
    }
    try {
        (void)loch::http::parse_keep_alive(nlohmann::json(std::string(body)));
    } catch (const loch::broker::Error&) {
    }
    return 0;
}
