// Fuzzes the llama-server kind's reading of a request body as chat messages (chat_messages_of: Chat
// Completions, Anthropic Messages, Responses), which the slot restore's probe and the exact context check
// use on every request. The first byte picks the route, the rest is parsed as JSON (any JSON value, not
// only what the request reader accepts). Any outcome but a crash, a leak or an exception is a finding; a
// rendering is always an array of objects with a string role.
// fuzz-sources: engines/kinds/llama_server_messages.cpp
#include <cstddef>
#include <cstdint>
#include <string_view>

#include <nlohmann/json.hpp>

#include "engines/kinds/llama_server.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
    if (size == 0) return 0;
    static constexpr std::string_view kRoutes[] = {"/v1/chat/completions", "/v1/messages", "/v1/responses",
                                                   "/v1/completions"};
    const auto route = kRoutes[data[0] % 4];
    const std::string_view text(reinterpret_cast<const char*>(data) + 1, size - 1);
    const auto body = nlohmann::json::parse(text, nullptr, false);
    if (body.is_discarded()) return 0;
    const auto messages = loch::engines::chat_messages_of(route, body);
    if (!messages) return 0;
    if (!messages->is_array()) __builtin_trap();
    if (route != "/v1/chat/completions")  // (chat bodies are passed through as sent)
        for (const auto& m : *messages)
            if (!m.is_object() || !m.contains("role") || !m["role"].is_string()) __builtin_trap();
    (void)messages->dump();
    for (const auto& m : *messages) (void)loch::engines::type_of(m);
    return 0;
}
