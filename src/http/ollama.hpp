// http/ollama — Ollama's listing API (`/api/tags`, `/api/ps`) over the broker's status, for the clients that
// speak only Ollama (its Python client, Open WebUI's Ollama connection, litellm's ollama/ provider). Pure:
// the broker's /loch/status JSON in, Ollama's shapes out. Its chat/generate/embed routes are not served yet.
#pragma once

#include <chrono>

#include <nlohmann/json.hpp>

namespace loch::http {

// Ollama's `details` of a model; loch does not read these from the file (yet): empty fields.
nlohmann::json ollama_details();

// {"models": [...]} in Ollama's shape: every model (`running_only` false, /api/tags) or those with an engine
// up (/api/ps: size = the reservation, size_vram = that on a GPU, expires_at = when keep_alive lets it go).
nlohmann::json ollama_models(const nlohmann::json& status, bool running_only,
                             std::chrono::system_clock::time_point now = std::chrono::system_clock::now());

}  // namespace loch::http
