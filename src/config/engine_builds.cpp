#include "config/engine_builds.hpp"

#include "config/config.hpp"

#include <unistd.h>

#include <fstream>
#include <iterator>

#include <nlohmann/json.hpp>

namespace loch::config {

namespace fs = std::filesystem;

namespace {

bool executable(const fs::path& p) {
    std::error_code ec;
    return fs::is_regular_file(p, ec) && ::access(p.c_str(), X_OK) == 0;
}

// What engine-build.json in `dir` says of `program`.
EngineBuild described(const fs::path& dir, std::string_view program, fs::path path) {
    const auto file = dir / "engine-build.json";
    std::ifstream in(file);
    if (!in)
        return {std::move(path), "", "", "no " + file.string() + " (built by hand?): its backend is unknown"};
    const std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    return describe_engine_build(text, program, std::move(path), file.string());
}

}  // namespace

EngineBuild describe_engine_build(std::string_view json_text, std::string_view program, fs::path path,
                                  const std::string& file) {
    EngineBuild b{std::move(path), "", "", ""};
    const auto j = nlohmann::json::parse(json_text, nullptr, false);
    const auto text = [&](const char* key) -> const std::string* {
        const auto it = j.find(key);
        return it != j.end() && it->is_string() ? it->get_ptr<const std::string*>() : nullptr;
    };
    if (j.is_discarded() || !j.is_object() || !text("backend") || text("backend")->empty() ||
        !j.contains("engines") || !j["engines"].is_object()) {
        b.from = file + " is not an engine-build file: its backend is unknown";
        return b;
    }
    if (!j["engines"].contains(std::string(program))) {
        b.from = file + " does not list " + std::string(program) + ": its backend is unknown";
        return b;
    }
    b.backend = *text("backend");
    if (const auto* t = text("targets")) b.targets = *t;
    b.from = file;
    return b;
}

std::vector<EngineBuild> find_engine_builds(const fs::path& engine_dir, std::string_view program,
                                            const fs::path& fallback) {
    std::vector<EngineBuild> out;
    for (const auto backend : kGpuBackends) {
        const auto dir = engine_dir / std::string(backend);
        const auto p = dir / std::string(program);
        if (!executable(p)) continue;
        auto b = described(dir, program, p);
        if (b.backend.empty()) {  // the folder's name says it where no file does
            b.backend = std::string(backend);
            b.from = p.parent_path().string() + " (by its folder's name)";
        }
        out.push_back(std::move(b));
    }
    if (!fallback.empty()) out.push_back(described(fallback.parent_path(), program, fallback));
    return out;
}

const EngineBuild* build_for(const std::vector<EngineBuild>& builds, std::string_view backend) {
    for (const auto& b : builds)
        if (b.backend == backend) return &b;
    for (const auto& b : builds)
        if (b.backend.empty()) return &b;
    return nullptr;
}

std::vector<EngineBuild> Config::builds_of(std::string_view kind) const {
    if (auto it = builds.find(std::string(kind)); it != builds.end()) return it->second;
    if (auto it = programs.find(std::string(kind)); it != programs.end())
        return {EngineBuild{it->second, "", "", "resolved without engine-build.json"}};
    return {};
}

fs::path Config::program(std::string_view kind, std::string_view backend) const {
    const auto all = builds_of(kind);
    const auto* b = build_for(all, backend);
    return b ? b->program : fs::path();
}

bool Config::reaches(std::string_view kind, std::string_view backend) const {
    if (!programs.contains(std::string(kind)) && !builds.contains(std::string(kind))) return true;
    return !program(kind, backend).empty();
}

std::string Config::backend_for(std::string_view device, const std::vector<std::string>& candidates) const {
    if (auto b = this->device(device).backend) return *b;
    if (candidates.empty()) return "cpu";
    for (const auto& c : candidates)
        for (const auto& [kind, list] : builds)
            for (const auto& b : list)
                if (b.backend == c) return c;
    return candidates.front();
}

}  // namespace loch::config
