// engines/spec — what one engine launch needs: the config's model entry plus loch's placement decision,
// turned into an argv (never a shell command line) and the supervision settings.
#pragma once

#include <chrono>
#include <cstdint>
#include <filesystem>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "config/config.hpp"

namespace loch::engines {

// What the broker decided for this launch, beyond the config.
struct LaunchOptions {
    std::string host = "127.0.0.1";   // engines listen on localhost only
    std::uint16_t port = 0;           // 0 = find a free port now
    std::optional<int> n_gpu_layers;  // overrides the model's args.n_gpu_layers (placement)
    std::vector<std::string>
        llama_devices;  // llama-server --device list ("CUDA0", "ROCm0", "none"); empty = not passed
    std::map<std::string, std::string>
        env;  // extra environment (e.g. CUDA_VISIBLE_DEVICES, HIP_VISIBLE_DEVICES)
};

struct EngineSpec {
    std::string model_name;
    config::EngineKind kind = config::EngineKind::llama_server;
    std::vector<std::string> argv;
    std::map<std::string, std::string> env;
    std::string host = "127.0.0.1";
    std::uint16_t port = 0;
    std::string health_path = "/health";
    std::chrono::seconds startup_timeout{3600};
    std::chrono::seconds stop_grace{10};
    std::filesystem::path log_file;  // <log_dir>/<model name, filesystem-safe>.log
    std::size_t ring_lines = 500;
    // Once ready: GET health_path every hang_after/4 (250 ms..5 s); no HTTP answer for hang_after → the
    // engine is hung and is killed (ExitKind::hung). Zero turns the watch off.
    std::chrono::milliseconds hang_after{std::chrono::seconds(120)};
    // loch's secret for this run. llama-server gets it as LLAMA_API_KEY (environment, not argv: argv is
    // world-readable in /proc) and refuses requests without it; loch sends `Authorization: Bearer <key>`.
    // A command engine finds it in LOCH_ENGINE_API_KEY and may check it. Never shown in /loch/status.
    std::string api_key;
};

// Builds the spec for `model` (dispatching on its engine kind); picks a free port when launch.port == 0.
// Throws std::invalid_argument for an impossible combination (e.g. a command template with an unknown
// placeholder — normally caught at config load).
EngineSpec make_engine_spec(const config::Config& cfg, const config::ModelConfig& model,
                            const LaunchOptions& launch = {});

// A model name as a file name: characters outside [A-Za-z0-9._-] become '_' ("org/m:7b" → "org_m_7b").
std::string log_file_stem(std::string_view model_name);

}  // namespace loch::engines
