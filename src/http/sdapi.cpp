// A1111's model list and checkpoint names, over loch's configured image models.
#include "http/sdapi.hpp"

#include <filesystem>

#include "broker/error.hpp"

namespace loch::http {

using broker::Error;
using broker::ErrorKind;

nlohmann::json sd_models(const std::vector<const config::ModelConfig*>& image_models) {
    nlohmann::json out = nlohmann::json::array();
    for (const auto* m : image_models)
        out.push_back({{"title", m->name},
                       {"model_name", m->name},
                       {"hash", nullptr},
                       {"sha256", nullptr},
                       {"filename", m->path.filename().string()},
                       {"config", nullptr}});
    return out;
}

namespace {

bool means(const config::ModelConfig& m, const std::string& asked) {
    if (asked == m.name) return true;
    for (const auto& a : m.aliases)
        if (asked == a) return true;
    // "flux [a1b2c3d4]" (A1111 titles carry a hash) or "flux.safetensors" / "flux-dev.gguf" (a file name).
    std::string bare = asked.substr(0, asked.find(" ["));
    if (bare == m.name) return true;
    const auto stem = std::filesystem::path(bare).stem().string();
    return stem == m.name ||
           (!m.path.empty() && (bare == m.path.filename().string() || stem == m.path.stem().string()));
}

std::string names(const std::vector<const config::ModelConfig*>& ms) {
    std::string s;
    for (const auto* m : ms) s += (s.empty() ? "" : ", ") + m->name;
    return s.empty() ? "none is configured" : s;
}

}  // namespace

std::string sdapi_model(const std::string& asked,
                        const std::vector<const config::ModelConfig*>& image_models) {
    if (asked.empty()) {
        if (image_models.size() == 1) return image_models.front()->name;
        throw Error(ErrorKind::invalid_request,
                    "which image model? name it in 'model' or override_settings.sd_model_checkpoint (image "
                    "models: " +
                        names(image_models) + ")",
                    {{"image_models", nlohmann::json(sd_models(image_models))}});
    }
    for (const auto* m : image_models)
        if (means(*m, asked)) return m->name;
    throw Error(ErrorKind::model_not_found,
                "no image model named '" + asked + "' (image models: " + names(image_models) + ")",
                {{"model", asked}});
}

}  // namespace loch::http
