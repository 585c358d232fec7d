// doctor — the platform traps that make inference jobs fail silently or late, found from what the device
// probes read (devices/probe.hpp), each with the evidence, a plain explanation and the fix.
//
// Checks (ids are stable; docs/devices.md describes each):
//   apu-gtt-ceiling          APU whose GTT pool (what allocations use) is smaller than the BIOS carve-out
//   unified-memory-env       GGML_CUDA_ENABLE_UNIFIED_MEMORY set: SIGSEGV on AMD APUs, cgroup charging
//   linux-firmware-broken    linux-firmware 20251125 with a Strix Halo GPU (ROCm breaks)
//   hsa-override-gfx         GPU target without official ROCm wheels and no HSA_OVERRIDE_GFX_VERSION
//   max-map-count            vm.max_map_count too low to mmap 70B+ models
//   outside-gpu-process      processes loch did not start holding GPU memory (PID and command)
//   container-memory-limit   a cgroup limit below the machine's RAM caps every budget
//   memory-limit-below-model a cgroup limit below the largest model's plan (CPU / unified memory)
//   model-does-not-fit       a configured model larger than every device's usable budget
//   vulkan-heap-too-small    a Vulkan engine on an APU whose DEVICE_LOCAL heap is too small
//   budget-unknown           a device whose usable budget could not be computed
//   engine-build-missing     a GPU that no engine build reaches (only CPU builds): models never run there
//   limit-never-fits         a configured limit (max_size, ctx × slots, an audio length) no device can keep
#pragma once

#include <cstdint>
#include <optional>
#include <set>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json_fwd.hpp>

#include "core/memory.hpp"
#include "devices/device.hpp"

namespace loch::doctor {

enum class Severity { info, warning, error };
std::string_view to_string(Severity s);

// One thing the doctor read: what, its value, and where it came from.
struct Evidence {
    Evidence(std::string what_, std::string value_, std::string from_,
             std::optional<std::uint64_t> bytes_ = std::nullopt)
        : what(std::move(what_)), value(std::move(value_)), from(std::move(from_)), bytes(bytes_) {}

    std::string what;                    // "GTT total"
    std::string value;                   // "24.00 GiB (25769803776 B)"
    std::string from;                    // "sysfs card0/device/mem_info_gtt_total"
    std::optional<std::uint64_t> bytes;  // exact bytes when the evidence is a memory figure
};

struct Finding {
    std::string id;  // stable check id, e.g. "apu-gtt-ceiling"
    Severity severity = Severity::warning;
    std::string device;  // device id the finding is about, "" for the system
    std::vector<Evidence> evidence;
    std::string explanation;  // what goes wrong, in plain words
    std::string fix;          // what to do: kernel parameters, BIOS setting, env var, package
};

// Memory one configured model needs on a single device. The caller sizes it (loch's planner for a GGUF
// file, the config's planned size) so the doctor stays independent of where models come from.
struct ModelDemand {
    std::string name;
    MemoryFigure bytes;
};

// One engine binary found and the backend it reaches (config/engine_builds.hpp), for engine-build-missing.
struct EngineBinary {
    std::string program;  // "llama-server"
    std::string path;
    std::string backend;  // "cpu", "cuda", "rocm", "vulkan"; "" when nothing says (it may reach any)
    std::string from;     // the engine-build.json that said so, or why it is unknown
};

// A model of `loch doctor -c`'s config whose configured limit can never run on the devices it may use: what
// its engine kind says (broker/never_fits.hpp asks it), with the largest value that fits.
struct LimitNeverFits {
    std::string model;
    std::vector<std::string> lines;
    std::string devices;  // where it was checked, with their capacities
};

struct Input {
    std::vector<ModelDemand> models;
    std::vector<std::string> engines;         // engine backends configured: "vulkan", "rocm", "cuda", "cpu"
    std::set<int> own_pids;                   // processes loch started (not "outside" memory holders)
    std::vector<EngineBinary> engine_builds;  // empty: the builds are not checked
    std::vector<LimitNeverFits> limits;       // from a config (`-c`); empty without one
};

struct CheckInfo {
    std::string_view id;
    std::string_view summary;
};
const std::vector<CheckInfo>& all_checks();

// Runs every check; findings ordered by severity (errors first), then by check order.
std::vector<Finding> diagnose(const devices::DeviceReport& report, const Input& input);

bool has_errors(const std::vector<Finding>& findings);

nlohmann::json to_json(const Finding& f);
nlohmann::json to_json(const std::vector<Finding>& findings);

}  // namespace loch::doctor
