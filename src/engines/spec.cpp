#include "engines/spec.hpp"

#include <cctype>
#include <stdexcept>

#include "engines/kind.hpp"
#include "engines/process.hpp"

namespace loch::engines {

std::string log_file_stem(std::string_view model_name) {
    std::string out;
    for (char c : model_name) {
        const bool ok = std::isalnum(static_cast<unsigned char>(c)) || c == '.' || c == '_' || c == '-';
        out += ok ? c : '_';
    }
    if (out.empty() || out[0] == '.') out.insert(0, "model");  // never "", ".", ".." or a hidden file
    return out;
}

EngineSpec base_spec(const config::Config& cfg, const config::ModelConfig& model, std::uint16_t port) {
    EngineSpec s;
    s.model_name = model.name;
    s.port = port;
    s.startup_timeout = model.startup_timeout;
    s.stop_grace = cfg.stop_grace;
    s.log_file = cfg.log_dir / (log_file_stem(model.name) + ".log");
    s.hang_after = model.watchdog.value_or(std::chrono::seconds(120));
    s.api_key = random_token();
    return s;
}

std::vector<Placement> Placement::all() const {
    std::vector<Placement> out{*this};
    out.front().others.clear();
    out.front().shares.clear();
    out.insert(out.end(), others.begin(), others.end());
    return out;
}

std::map<std::string, std::string> device_environment(const Placement& where, bool restrict) {
    std::map<std::string, std::string> env{{"CUDA_DEVICE_ORDER", "PCI_BUS_ID"}};
    if (!restrict) return env;
    // The other backends' devices are hidden; the admitted ones are shown alone (main first) when the probe
    // numbered them.
    std::string visible;
    for (const auto& d : where.all()) {
        if (!d.ordinal) {
            visible.clear();
            break;
        }
        visible += (visible.empty() ? "" : ",") + std::to_string(*d.ordinal);
    }
    const auto set = [&](const char* var, bool mine) {
        if (!mine)
            env[var] = "-1";
        else if (!visible.empty())
            env[var] = visible;
    };
    set("CUDA_VISIBLE_DEVICES", where.backend == "cuda");
    set("HIP_VISIBLE_DEVICES", where.backend == "rocm");
    set("ROCR_VISIBLE_DEVICES", where.backend == "rocm");
    // ggml-vulkan shows the listed Vulkan devices alone, in that order; without the list it takes every
    // discrete GPU and never a software device (lavapipe). No "-1" for the others: an index it does not have
    // ends the engine ("Invalid Vulkan device index").
    if (where.backend == "vulkan" && !visible.empty()) env["GGML_VK_VISIBLE_DEVICES"] = visible;
    return env;
}

EngineSpec make_engine_spec(const config::Config& cfg, const config::ModelConfig& model,
                            const Placement& where, std::uint16_t port) {
    return kind_of(model).launch(cfg, model, where, port == 0 ? find_free_port() : port);
}

std::optional<std::string> unsafe_environment(const Placement& where, const EngineSpec& spec,
                                              const std::optional<std::string>& inherited) {
    constexpr const char* kVar = "GGML_CUDA_ENABLE_UNIFIED_MEMORY";
    const auto it = spec.env.find(kVar);
    const std::optional<std::string> value = it != spec.env.end() ? std::optional(it->second) : inherited;
    if (!value || where.backend != "rocm" || !where.unified) return std::nullopt;
    return std::string(kVar) + "=\"" + *value + "\" is in the environment this engine would inherit, and " +
           where.device +
           " is an APU on ROCm: ggml then allocates with hipMallocManaged and advises "
           "hipMemAdviseSetCoarseGrain, which makes the memory unreadable by the CPU — the engine dies of "
           "SIGSEGV "
           "tens of seconds into a job (even \"0\" turns it on: ggml tests only that the variable exists), "
           "and "
           "the managed pages are charged to the memory cgroup. Remove it from loch's environment (systemd "
           "Environment=, the container's env, the shell profile) and restart loch; on an APU the GPU "
           "already "
           "uses the machine's RAM through GTT (raise GTT instead: `loch doctor`, apu-gtt-ceiling)";
}

}  // namespace loch::engines
