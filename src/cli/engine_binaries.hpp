// cli/engine_binaries — the engine builds the doctor and `loch devices` judge the devices against: those of
// a loaded config (the kinds its models use), or the pinned engines found in an engine folder.
#pragma once

#include <filesystem>
#include <vector>

#include "config/config.hpp"
#include "doctor/doctor.hpp"

namespace loch::cli {

// llama-server, sd-server and whisper-server as config::find_engine_builds finds them under `engine_dir`
// (then on PATH).
std::vector<doctor::EngineBinary> engine_binaries(const std::filesystem::path& engine_dir);
// The builds the config resolved for the kinds its models use.
std::vector<doctor::EngineBinary> engine_binaries(const config::Config& cfg);

// What loch would start on a device: the backend (the first of the device's backends that a build exists
// for, as config::Config::backend_for chooses without a configured one) and, per engine, the binary ("" when
// no build reaches it).
struct DeviceEngines {
    std::string backend;
    std::vector<std::pair<std::string, std::string>> programs;  // engine → binary
};
DeviceEngines engines_for(const devices::Device& d, const std::vector<doctor::EngineBinary>& builds);

}  // namespace loch::cli
