// The command kind: argv template, device visibility, configured or file-size footprint.
#include "engines/kinds/command.hpp"

#include <filesystem>
#include <stdexcept>

#include "config/placeholders.hpp"
#include "core/memory.hpp"

namespace loch::engines {

std::vector<std::string> command_argv(const config::ModelConfig& model, std::uint16_t port) {
    if (!model.command) throw std::invalid_argument("model '" + model.name + "' has no command template");
    const std::map<std::string, std::string> values{
        {"host", "127.0.0.1"},
        {"port", std::to_string(port)},
        {"model_path", model.path.string()},
        {"model_name", model.name},
        {"ctx", std::to_string(model.args.ctx)},
        {"parallel", std::to_string(model.args.parallel)},
    };
    std::vector<std::string> argv;
    for (const auto& t : model.command->argv) argv.push_back(config::expand_placeholders(t, values));
    if (argv.empty()) throw std::invalid_argument("model '" + model.name + "': empty command argv");
    return argv;
}

EngineSpec CommandKind::launch(const config::Config& cfg, const config::ModelConfig& model,
                               const Placement& where, std::uint16_t port) const {
    EngineSpec s = base_spec(cfg, model, port);
    s.kind = std::string(name());
    s.argv = command_argv(model, port);
    s.health_path = model.command->health_path;  // empty: ready when the port accepts a connection
    s.env = device_environment(where, true);
    for (const auto& [k, v] : model.command->env) s.env.insert_or_assign(k, v);
    s.env["LOCH_ENGINE_API_KEY"] = s.api_key;
    return s;
}

namespace {

// A file's size, or every regular file's under a folder (a model folder of safetensors shards).
std::uint64_t files_size(const std::filesystem::path& p) {
    std::error_code ec;
    if (p.empty()) return 0;
    if (!std::filesystem::is_directory(p, ec)) {
        const auto n = std::filesystem::file_size(p, ec);
        return ec ? 0 : n;
    }
    std::uint64_t total = 0;
    for (auto it = std::filesystem::recursive_directory_iterator(p, ec);
         !ec && it != std::filesystem::recursive_directory_iterator(); it.increment(ec))
        if (it->is_regular_file(ec)) total += it->file_size(ec);
    return total;
}

}  // namespace

Footprint CommandKind::formula(const config::Config& cfg, const config::ModelConfig& model,
                               const std::vector<Placement>& devices) const {
    Footprint fp;
    const std::uint64_t size = files_size(model.path);
    bool any_configured = false;
    for (const auto& d : devices) {
        Need n;
        n.device = d.device;
        n.ctx = model.args.ctx;
        n.slots = model.args.parallel;
        if (auto m = model.memory_on(d.device)) {
            n.bytes = *m;
            n.source = Source::configured;
            n.why = "configured memory for " + d.device;
            any_configured = true;
        } else {
            n.bytes = size;
            n.weights_bytes = size;
            n.why = "size of the model's files (no `memory:` for " + d.device + ")";
        }
        n.bytes += cfg.device(d.device).margin;
        fp.needs.push_back(n);
    }
    fp.source = any_configured ? Source::configured : Source::formula;
    fp.detail = any_configured ? "configured memory" : "model files " + human_bytes(size) + " (no `memory:`)";
    return fp;
}

}  // namespace loch::engines
