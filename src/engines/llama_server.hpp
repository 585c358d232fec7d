// engines/llama_server — the llama-server adapter: config → argv.
//
//   <binary> -m <path> --host 127.0.0.1 --port <p> -c <ctx> -np <parallel> -ngl <n> -fa <on|off|auto>
//            [-ctk t] [-ctv t] [-ub n] [-b n] [-t n] [--device list] --fit off -lv 4 --no-webui <extra…>
//
// `--fit off`: loch decides placement; an engine left to fit itself silently takes the whole card
// (docs/engines.md, ../shared reference). `-lv 4`: this llama.cpp prints buffer sizes (model / KV /
// compute per device) only at verbosity 4, and loch reads the measured footprint from them.
#pragma once

#include <filesystem>
#include <string>
#include <vector>

#include "config/config.hpp"
#include "engines/spec.hpp"

namespace loch::engines {

// -ngl when neither the config nor the placement says: everything on the GPU.
inline constexpr int kAllLayers = 999;

std::vector<std::string> llama_server_argv(const std::filesystem::path& binary,
                                           const config::ModelConfig& model, const LaunchOptions& launch);

}  // namespace loch::engines
