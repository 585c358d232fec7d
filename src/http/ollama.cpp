#include "http/ollama.hpp"

#include <string>

#include "core/time_text.hpp"

namespace loch::http {

nlohmann::json ollama_details() {
    return {{"parent_model", ""},  {"format", "gguf"},     {"family", ""},
            {"families", nullptr}, {"parameter_size", ""}, {"quantization_level", ""}};
}

nlohmann::json ollama_models(const nlohmann::json& status, bool running_only,
                             std::chrono::system_clock::time_point now) {
    nlohmann::json models = nlohmann::json::array();
    if (!status.contains("engines")) return {{"models", models}};
    for (const auto& e : status["engines"]) {
        const std::string state = e.value("state", "stopped");
        const bool running = state == "ready" || state == "loading";
        if (running_only && !running) continue;
        std::uint64_t size = 0;
        if (running && e.contains("reservation"))
            size = e["reservation"].value("bytes", std::uint64_t{0});
        else if (e.contains("footprint") && !e["footprint"]["needs"].empty())
            size = e["footprint"]["needs"][0].value("bytes", std::uint64_t{0});
        const std::string name = e.value("name", "");
        nlohmann::json m = {{"name", name}, {"model", name}, {"modified_at", iso8601_utc(now)},
                            {"size", size}, {"digest", ""},  {"details", ollama_details()}};
        if (running_only) {
            const std::string device = e.value("device", "cpu");
            m["size_vram"] = device == "cpu" ? 0 : size;
            // keep_alive: forever → far in the future, as Ollama reports a model loaded without expiry.
            auto until = now + std::chrono::hours(24 * 365 * 100);
            if (e.contains("keep_alive_s")) {
                const double left = e["keep_alive_s"].get<double>() - e.value("idle_s", 0.0);
                until = now + std::chrono::seconds(static_cast<long long>(left > 0 ? left : 0));
            }
            m["expires_at"] = iso8601_utc(until);
        }
        models.push_back(std::move(m));
    }
    return {{"models", models}};
}

}  // namespace loch::http
