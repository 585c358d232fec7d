// http/sdapi — what A1111-style clients (AUTOMATIC1111's web UI API: Open WebUI's image generation, Krita and
// SillyTavern plugins) need beside /sdapi/v1/txt2img itself: the model list they pick a checkpoint from
// (GET /sdapi/v1/sd-models), and which model a request means when it names none in `model` — the checkpoint
// in override_settings.sd_model_checkpoint (as they list it: "name", "name [hash]" or a file name), else the
// only image model, else a clear 400 that lists them.
#pragma once

#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "config/config.hpp"

namespace loch::http {

// A1111's shape: [{"title", "model_name", "hash", "sha256", "filename", "config"}], one per image model.
nlohmann::json sd_models(const std::vector<const config::ModelConfig*>& image_models);

// The configured model `asked` means (empty: the client named none). Throws broker::Error: invalid_request
// when none was named and there is not exactly one image model, model_not_found when the name matches none.
std::string sdapi_model(const std::string& asked,
                        const std::vector<const config::ModelConfig*>& image_models);

}  // namespace loch::http
