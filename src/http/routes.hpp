// http/routes — THE table of the model API: every route a client sends a model request to, with its
// method, its body kind and where the body names the model. The router reads it; the proxy forwards the
// body as it came, with its Content-Type. A new API family (images, audio) is a row here — and, for a
// multipart body, the model field is a form field instead of a JSON member. Which routes a model answers
// is its engine kind's business (Kind::serves), checked before anything starts.
#pragma once

#include <optional>
#include <span>
#include <string>
#include <string_view>

#include "http/openai_request.hpp"

namespace loch::http {

enum class BodyKind {
    json,       // application/json: `model_field` is a top-level member
    multipart,  // multipart/form-data: `model_field` is a form field (audio and image uploads)
};

struct ModelRoute {
    std::string_view path;
    std::string_view method;
    BodyKind body;
    std::string_view model_field;  // where the body names the model
    Endpoint endpoint;             // how a JSON body is read and checked (openai_request.hpp)
};

std::span<const ModelRoute> model_routes();
// The row for `path`; nullptr when it is not a model route.
const ModelRoute* find_model_route(std::string_view path);
// Why a batch item cannot go to `path` (items are POSTs with a JSON body); nothing when it can.
std::optional<std::string> batch_route_problem(std::string_view path);

}  // namespace loch::http
