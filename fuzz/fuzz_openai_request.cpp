// Fuzzes the OpenAI request reader (http/openai_request) and the SSE framer with arbitrary bytes: they read
// outside input on every request. The first byte picks the endpoint; any outcome but a crash, a leak or an
// exception other than broker::Error is a finding.
// fuzz-sources: http/openai_request.cpp http/sse.cpp broker/error.cpp
#include <cstddef>
#include <cstdint>
#include <string_view>

#include "broker/error.hpp"
#include "http/openai_request.hpp"
#include "http/sse.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
    if (size == 0) return 0;
    const auto endpoint = static_cast<loch::http::Endpoint>(data[0] % 5);
    const std::string_view body(reinterpret_cast<const char*>(data) + 1, size - 1);
    try {
        auto r = loch::http::parse_openai_request(endpoint, body);
        if (r.model.empty()) __builtin_trap();  // accepted requests always name a model
    } catch (const loch::broker::Error&) {
    }
    // The same bytes as an upstream SSE stream, split at an arbitrary point: no byte may be lost.
    loch::http::SseFramer framer(64);
    const std::size_t cut = size > 1 ? data[0] % body.size() : 0;
    std::string joined;
    for (auto& e : framer.feed(body.substr(0, cut))) joined += e;
    for (auto& e : framer.feed(body.substr(cut))) joined += e;
    joined += framer.take_rest();
    if (joined != body) __builtin_trap();
    return 0;
}
