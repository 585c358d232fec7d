#include "http/routes.hpp"

#include <fmt/format.h>

#include <array>

namespace loch::http {

namespace {

constexpr std::array kRoutes{
    ModelRoute{"/v1/chat/completions", "POST", BodyKind::json, "model", Endpoint::chat_completions},
    ModelRoute{"/v1/completions", "POST", BodyKind::json, "model", Endpoint::completions},
    ModelRoute{"/v1/embeddings", "POST", BodyKind::json, "model", Endpoint::embeddings},
    ModelRoute{"/v1/images/generations", "POST", BodyKind::json, "model", Endpoint::image_generations},
    ModelRoute{"/v1/images/edits", "POST", BodyKind::multipart, "model", Endpoint::image_edits},
    ModelRoute{"/sdapi/v1/txt2img", "POST", BodyKind::json, "model", Endpoint::sdapi_txt2img},
    ModelRoute{"/v1/audio/transcriptions", "POST", BodyKind::multipart, "model",
               Endpoint::audio_transcriptions},
    ModelRoute{"/v1/audio/translations", "POST", BodyKind::multipart, "model", Endpoint::audio_translations},
    ModelRoute{"/v1/audio/speech", "POST", BodyKind::json, "model", Endpoint::audio_speech},
    ModelRoute{"/v1/responses", "POST", BodyKind::json, "model", Endpoint::responses},
    ModelRoute{"/v1/messages", "POST", BodyKind::json, "model", Endpoint::anthropic_messages},
    ModelRoute{"/v1/rerank", "POST", BodyKind::json, "model", Endpoint::rerank},
    ModelRoute{"/v1/messages/count_tokens", "POST", BodyKind::json, "model",
               Endpoint::anthropic_count_tokens},
    ModelRoute{"/v1/responses/input_tokens", "POST", BodyKind::json, "model",
               Endpoint::responses_input_tokens},
};

}  // namespace

std::span<const ModelRoute> model_routes() {
    return kRoutes;
}

const ModelRoute* find_model_route(std::string_view path) {
    for (const auto& r : kRoutes)
        if (r.path == path) return &r;
    return nullptr;
}

std::optional<std::string> batch_route_problem(std::string_view path) {
    const ModelRoute* r = find_model_route(path);
    if (r && r->body == BodyKind::json && r->method == "POST") return std::nullopt;
    return fmt::format(
        "\"{}\" is not a route loch runs batch items on (a POST route with a JSON body: "
        "/v1/chat/completions, /v1/completions, /v1/embeddings, …)",
        path);
}

}  // namespace loch::http
