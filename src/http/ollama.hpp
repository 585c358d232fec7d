// http/ollama — Ollama's listing API (`/api/tags`, `/api/ps`) over the broker's status, for the clients that
// speak only Ollama (its Python client, Open WebUI's Ollama connection, litellm's ollama/ provider). Pure:
// the broker's /loch/status JSON in, Ollama's shapes out. Its chat/generate/embed routes are not served yet.
#pragma once

#include <chrono>

#include <nlohmann/json.hpp>

namespace loch::http {

// Ollama's `details` of a model, from what its file says (the status entry's "file": Kind::describe_file):
// family and families (the architecture), parameter_size ("8.0B"), quantization_level ("Q4_K_M").
nlohmann::json ollama_details(const nlohmann::json& engine_status);
// Ollama's model_info and capabilities for /api/show: general.architecture, <arch>.context_length, and
// "embedding" or "completion".
nlohmann::json ollama_model_info(const nlohmann::json& engine_status);
nlohmann::json ollama_capabilities(const nlohmann::json& engine_status);

// Ollama's error shape: {"error": "<message>"} (its clients read a string), with loch's type and numbers
// beside it.
nlohmann::json ollama_error_body(std::string_view message, std::string_view type,
                                 const nlohmann::json& details);

// {"models": [...]} in Ollama's shape: every model (`running_only` false, /api/tags: size = the file's, as
// Ollama's) or those with an engine up (/api/ps: size = the reservation, size_vram = that on a GPU,
// expires_at = when keep_alive lets it go).
nlohmann::json ollama_models(const nlohmann::json& status, bool running_only,
                             std::chrono::system_clock::time_point now = std::chrono::system_clock::now());

}  // namespace loch::http
