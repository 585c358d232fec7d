#include "http/ollama.hpp"

#include <cstdio>
#include <string>

#include "core/time_text.hpp"

namespace loch::http {

namespace {

const nlohmann::json& file_of(const nlohmann::json& e) {
    static const nlohmann::json kNone = nlohmann::json::object();
    const auto it = e.find("file");
    return it != e.end() && it->is_object() ? *it : kNone;
}

// Ollama writes parameter counts as "8.0B", "494.03M".
std::string parameter_size(std::uint64_t n) {
    char buf[32];
    if (n >= 1'000'000'000)
        std::snprintf(buf, sizeof buf, "%.1fB", double(n) / 1e9);
    else if (n >= 1'000'000)
        std::snprintf(buf, sizeof buf, "%.2fM", double(n) / 1e6);
    else
        std::snprintf(buf, sizeof buf, "%llu", static_cast<unsigned long long>(n));
    return buf;
}

}  // namespace

nlohmann::json ollama_error_body(std::string_view message, std::string_view type,
                                 const nlohmann::json& details) {
    return {{"error", std::string(message)}, {"type", std::string(type)}, {"details", details}};
}

nlohmann::json ollama_details(const nlohmann::json& e) {
    const auto& f = file_of(e);
    const std::string arch = f.value("architecture", "");
    const std::uint64_t params = f.value("parameter_count", std::uint64_t{0});
    return {{"parent_model", ""},
            {"format", f.value("format", "gguf")},
            {"family", arch},
            {"families", arch.empty() ? nlohmann::json(nullptr) : nlohmann::json::array({arch})},
            {"parameter_size", params ? parameter_size(params) : ""},
            {"quantization_level", f.value("quantization", "")}};
}

nlohmann::json ollama_model_info(const nlohmann::json& e) {
    const auto& f = file_of(e);
    const std::string arch = f.value("architecture", e.value("engine_kind", ""));
    nlohmann::json info = {{"general.architecture", arch}};
    if (f.contains("parameter_count")) info["general.parameter_count"] = f["parameter_count"];
    if (f.contains("context_length")) info[arch + ".context_length"] = f["context_length"];
    if (f.contains("embedding_length")) info[arch + ".embedding_length"] = f["embedding_length"];
    return info;
}

nlohmann::json ollama_capabilities(const nlohmann::json& e) {
    return nlohmann::json::array({file_of(e).value("embedding", false) ? "embedding" : "completion"});
}

nlohmann::json ollama_models(const nlohmann::json& status, bool running_only,
                             std::chrono::system_clock::time_point now) {
    nlohmann::json models = nlohmann::json::array();
    if (!status.contains("engines")) return {{"models", models}};
    for (const auto& e : status["engines"]) {
        const std::string state = e.value("state", "stopped");
        const bool running = state == "ready" || state == "loading";
        if (running_only && !running) continue;
        // /api/tags: the file's size (what Ollama lists); /api/ps: what it holds in memory.
        std::uint64_t size = file_of(e).value("bytes", std::uint64_t{0});
        if (running_only && e.contains("reservation"))
            size = e["reservation"].value("bytes", std::uint64_t{0});
        const std::string name = e.value("name", "");
        nlohmann::json m = {{"name", name}, {"model", name}, {"modified_at", iso8601_utc(now)},
                            {"size", size}, {"digest", ""},  {"details", ollama_details(e)}};
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
