// http/router — which handler a method + target goes to. Pure, so that routing is unit-tested without
// sockets. Unknown paths are `not_found`, a known path with the wrong method is `method_not_allowed`.
#pragma once

#include <optional>
#include <string>
#include <string_view>

#include "http/openai_request.hpp"
#include "http/routes.hpp"

namespace loch::http {

struct Route {
    enum class Kind {
        health,          // GET /health
        models,          // GET /v1/models
        openai,          // a model route (http/routes.hpp): POST /v1/chat/completions, /v1/completions, …
        status,          // GET /loch/status
        history,         // GET /loch/history: the last hour for the dashboard's plots
        plan,            // POST /loch/plan
        engine_log,      // GET /loch/engines/{name}/log[?lines=N]
        model,           // GET /v1/models/{id}
        ollama_version,  // GET /api/version
        ollama_tags,     // GET /api/tags: every model
        ollama_ps,       // GET /api/ps: the running ones
        ollama_pull,     // POST /api/pull: refused — loch does not download models
        ollama_generation,  // POST /api/chat, /api/generate, /api/embed, /api/embeddings (http/ollama_api)
        ollama_show,        // POST /api/show
        metrics,            // GET /metrics (Prometheus)
        dashboard,          // GET / (the web page), GET /loch/ui/… (its files)
        model_load,         // POST /loch/models/{name}/load
        model_unload,       // POST /loch/models/{name}/unload
        sdapi_models,       // GET /sdapi/v1/sd-models (A1111's checkpoint list: the image models)
        holds_list,         // GET /loch/holds
        hold_create,        // POST /loch/holds (broker/holds.hpp)
        hold_get,           // GET /loch/holds/{id}: its state (and a heartbeat)
        hold_update,        // POST /loch/holds/{id}: a heartbeat, optionally {"pgid": N}
        hold_release,       // DELETE /loch/holds/{id}
        files,              // /v1/files[/{id}[/content]]: the Batch API's files (http/batch_api.hpp)
        batches,            // /v1/batches[/{id}[/cancel]]: the Batch API's batches (http/batch_api.hpp)
        stored_response,  // GET|DELETE /v1/responses/{id}, GET …/{id}/input_items (http/responses_api.hpp)
        requests_list,    // GET /loch/requests: the model requests in flight (queued or running)
        request_cancel,   // DELETE /loch/requests/{id}: cancel a request (or a hold) by its id
        not_found,
        method_not_allowed,
    };
    Kind kind = Kind::not_found;
    Endpoint endpoint = Endpoint::chat_completions;  // openai
    const ModelRoute* model_route = nullptr;         // openai: its row of the route table
    std::string engine;       // engine_log, model, model_load/unload: the name; hold_*: the hold's id
    std::size_t lines = 100;  // engine_log
    bool follow = false;      // engine_log: ?follow=1 streams new lines (SSE)
    std::string path;         // ollama_generation: which; dashboard: the file
    std::string allow;        // method_not_allowed: the method that would work
};

Route route(std::string_view method, std::string_view target);

// Whether `authorization` ("Bearer <key>") carries one of `keys`. Compares in constant time per key.
bool authorized(std::string_view authorization, const std::vector<std::string>& keys);

}  // namespace loch::http
