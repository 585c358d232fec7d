#include "engines/spec.hpp"

#include <cctype>
#include <stdexcept>

#include "engines/command.hpp"
#include "engines/llama_server.hpp"
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

EngineSpec make_engine_spec(const config::Config& cfg, const config::ModelConfig& model,
                            const LaunchOptions& launch_in) {
    LaunchOptions launch = launch_in;
    if (launch.port == 0) launch.port = find_free_port();

    EngineSpec s;
    s.model_name = model.name;
    s.kind = model.engine;
    s.host = launch.host;
    s.port = launch.port;
    s.startup_timeout = model.startup_timeout;
    s.stop_grace = cfg.stop_grace;
    s.log_file = cfg.log_dir / (log_file_stem(model.name) + ".log");
    s.env = launch.env;
    s.hang_after = model.watchdog.value_or(std::chrono::seconds(120));
    s.api_key = random_token();
    if (model.engine == config::EngineKind::llama_server) {
        if (cfg.llama_server.empty())
            throw std::invalid_argument("no llama-server binary resolved in the config");
        s.argv = llama_server_argv(cfg.llama_server, model, launch);
        s.health_path = "/health";
        s.env["LLAMA_API_KEY"] = s.api_key;
    } else {
        s.argv = command_argv(model, launch);
        s.health_path = model.command->health_path;
        for (const auto& [k, v] : model.command->env) s.env.emplace(k, v);
        s.env["LOCH_ENGINE_API_KEY"] = s.api_key;
    }
    return s;
}

}  // namespace loch::engines
