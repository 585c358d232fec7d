#include "engines/llama_server.hpp"

namespace loch::engines {

std::vector<std::string> llama_server_argv(const std::filesystem::path& binary,
                                           const config::ModelConfig& model, const LaunchOptions& launch) {
    const auto& a = model.args;
    std::vector<std::string> argv{binary.string(),       "-m",     model.path.string(),         "--host",
                                  launch.host,           "--port", std::to_string(launch.port), "-c",
                                  std::to_string(a.ctx), "-np",    std::to_string(a.parallel)};
    const int ngl = launch.n_gpu_layers ? *launch.n_gpu_layers : a.n_gpu_layers.value_or(kAllLayers);
    argv.insert(argv.end(), {"-ngl", std::to_string(ngl)});
    argv.insert(argv.end(), {"-fa", std::string(config::to_string(a.flash_attn))});
    if (a.cache_type_k) argv.insert(argv.end(), {"-ctk", *a.cache_type_k});
    if (a.cache_type_v) argv.insert(argv.end(), {"-ctv", *a.cache_type_v});
    if (a.ubatch) argv.insert(argv.end(), {"-ub", std::to_string(*a.ubatch)});
    if (a.batch) argv.insert(argv.end(), {"-b", std::to_string(*a.batch)});
    if (a.threads) argv.insert(argv.end(), {"-t", std::to_string(*a.threads)});
    if (!launch.llama_devices.empty()) {
        std::string list;
        for (const auto& d : launch.llama_devices) list += (list.empty() ? "" : ",") + d;
        argv.insert(argv.end(), {"--device", list});
    }
    // loch decides placement; buffer sizes are printed only at verbosity 4; the web UI is not loch's.
    argv.insert(argv.end(), {"--fit", "off", "-lv", "4", "--no-webui"});
    argv.insert(argv.end(), a.extra.begin(), a.extra.end());
    return argv;
}

}  // namespace loch::engines
