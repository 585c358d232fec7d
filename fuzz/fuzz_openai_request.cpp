// Fuzzes the OpenAI request reader (http/openai_request) and the SSE framer with arbitrary bytes: they read
// outside input on every request. The first byte picks the endpoint (image edits and audio read the rest as
// a multipart/form-data body with boundary "XyZ"; the image-header, data-URL and WAV readers see it raw);
// any outcome but a crash, a leak or an exception other than broker::Error is a finding.
// fuzz-sources: http/openai_request.cpp http/multipart.cpp http/image_size.cpp http/audio_length.cpp
// fuzz-sources: http/data_url.cpp
// fuzz-sources: http/sse.cpp broker/error.cpp http/json_body.cpp responses/shape.cpp
#include <cstddef>
#include <cstdint>
#include <string_view>

#include "broker/error.hpp"
#include "http/audio_length.hpp"
#include "http/data_url.hpp"
#include "http/image_size.hpp"
#include "http/openai_request.hpp"
#include "http/sse.hpp"
#include "responses/shape.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
    if (size == 0) return 0;
    const auto endpoint = static_cast<loch::http::Endpoint>(data[0] % 9);
    const std::string_view body(reinterpret_cast<const char*>(data) + 1, size - 1);
    if (const auto wh = loch::http::image_size(body); wh && (wh->first == 0 || wh->second == 0))
        __builtin_trap();
    if (const auto s = loch::http::audio_seconds(body); s && !(*s >= 0)) __builtin_trap();
    try {
        const auto img = loch::http::read_image_url(body, "image_url");
        if (img.width == 0 || img.height == 0) __builtin_trap();  // read means sized
    } catch (const loch::broker::Error&) {
    }
    const bool form = endpoint == loch::http::Endpoint::image_edits ||
                      endpoint == loch::http::Endpoint::audio_transcriptions ||
                      endpoint == loch::http::Endpoint::audio_translations;
    try {
        auto r = loch::http::parse_openai_request(
            endpoint, body, form ? "multipart/form-data; boundary=\"XyZ\"" : "application/json");
        if (r.model.empty()) __builtin_trap();  // accepted requests always name a model
    } catch (const loch::broker::Error&) {
    }
    // The Responses API's own reading: the bytes as a client's input, a stored response to continue from,
    // and an engine's stream event (responses/shape.hpp).
    if (const auto j = nlohmann::json::parse(body, nullptr, false); !j.is_discarded()) {
        const auto items =
            loch::responses::input_items(j.is_object() ? j.value("input", nlohmann::json()) : j);
        if (!items.is_array()) __builtin_trap();
        (void)loch::responses::next_context(items, j);
        loch::responses::EventShaper shaper(
            loch::responses::echoed_fields(j.is_object() ? j : nlohmann::json::object(), "m", ""), 0);
        const auto shaped = shaper.shape(j);
        if (j.is_object() && !shaped.contains("sequence_number")) __builtin_trap();
        (void)loch::responses::complete_response(j, nlohmann::json::object(), 0);
    }
    // The same bytes as an upstream SSE stream, split at an arbitrary point: no byte may be lost.
    loch::http::SseFramer framer(64);
    const std::size_t cut = size > 1 ? data[0] % body.size() : 0;
    std::string joined;
    for (auto& e : framer.feed(body.substr(0, cut))) joined += e;
    // The relay's path: the views, and the same bytes as one run.
    std::string views;
    for (auto e : framer.feed_views(body.substr(cut))) views += e;
    if (views != framer.complete()) __builtin_trap();
    joined += views;
    joined += framer.take_rest();
    if (joined != body) __builtin_trap();
    return 0;
}
