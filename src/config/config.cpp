// The config types' own functions (config.hpp): a diagnostic's text, the error that carries them, a model
// looked up by name or alias, a device's settings, and what a kind's schema does when it adds nothing.
#include <algorithm>

#include "config/config.hpp"
#include "config/kind_schema.hpp"

namespace loch::config {

std::string Diagnostic::to_string() const {
    std::string out = file.empty() ? std::string("<config>") : file;
    if (line > 0) {
        out += ':' + std::to_string(line);
        if (column > 0) out += ':' + std::to_string(column);
    }
    out += ": ";
    if (!key.empty()) out += key + ": ";
    out += message;
    return out;
}

namespace {
std::string join_diagnostics(const std::vector<Diagnostic>& ds) {
    std::string out;
    for (const auto& d : ds) {
        if (!out.empty()) out += '\n';
        out += d.to_string();
    }
    return out.empty() ? std::string("invalid configuration") : out;
}
}  // namespace

ConfigError::ConfigError(std::vector<Diagnostic> diagnostics)
    : std::runtime_error(join_diagnostics(diagnostics)), diagnostics_(std::move(diagnostics)) {}

std::string_view to_string(Priority p) {
    return p == Priority::interactive ? "interactive" : "batch";
}
void KindSchema::check(Walker&, const YAML::Node&, const std::string&, ModelConfig&, bool) const {}

nlohmann::json KindSchema::describe_file(const ModelConfig& model) const {
    std::uint64_t bytes = 0;
    std::error_code ec;
    if (!model.path.empty()) {
        if (fs::is_directory(model.path, ec)) {
            for (const auto& e : fs::recursive_directory_iterator(model.path, ec))
                if (e.is_regular_file(ec)) bytes += e.file_size(ec);
        } else {
            const auto size = fs::file_size(model.path, ec);
            bytes = ec ? 0 : size;
        }
    }
    return {{"bytes", bytes}};
}

const ModelConfig* Config::find_model(std::string_view name_or_alias) const {
    for (const auto& m : models) {
        if (m.name == name_or_alias) return &m;
        if (std::find(m.aliases.begin(), m.aliases.end(), name_or_alias) != m.aliases.end()) return &m;
    }
    // Ollama's clients name every model with a tag, and an untagged name is "<name>:latest": the same model.
    constexpr std::string_view latest = ":latest";
    if (name_or_alias.size() > latest.size() && name_or_alias.ends_with(latest))
        return find_model(name_or_alias.substr(0, name_or_alias.size() - latest.size()));
    return nullptr;
}

DeviceConfig Config::device(std::string_view id) const {
    const auto it = devices.find(std::string(id));
    if (it != devices.end()) return it->second;
    DeviceConfig d;
    d.id = std::string(id);
    return d;
}

}  // namespace loch::config
