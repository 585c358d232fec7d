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

// Where the broker admitted a model: the device as `loch devices` names it, and how the engine's runtime
// numbers it. The ordinal comes from the probe (NVML order for CUDA, with CUDA_DEVICE_ORDER=PCI_BUS_ID set
// for the engine; KFD order for HIP), never from the digits of the id: `amd:card1` is HIP device 0 on a
// machine with one GPU.
//
// A model split over several devices (issue 14) is placed on its main device (the first the engine sees)
// with the others after it, and the share of the layers each one holds (main first).
struct Placement {
    std::string device = "cpu";     // "cpu", "nvidia:0", "amd:card1"
    std::string backend = "cpu";    // "cpu" | "cuda" | "rocm" | "vulkan"
    std::optional<int> ordinal;     // the backend's device index; unset for the CPU or when not probed
    std::uint64_t total_bytes = 0;  // the memory engines allocate from on it, as probed; 0 = unknown
    bool unified = false;           // an APU: its GPU memory is the machine's RAM (GTT)
    std::vector<Placement> others;  // a split: the other devices, in order (same backend)
    std::vector<float> shares;      // a split: each device's share of the layers, this one first
    // Vulkan: the driver's largest single allocation (maxMemoryAllocationSize), as probed; 0 = none or
    // unknown.
    std::uint64_t largest_allocation = 0;

    bool split() const { return !others.empty(); }
    // This device, then the others: every device the engine runs on.
    std::vector<Placement> all() const;
};

struct EngineSpec {
    std::string model_name;
    std::string kind;  // the engine kind's name (engines/kind.hpp)
    std::vector<std::string> argv;
    std::map<std::string, std::string> env;
    std::string host = "127.0.0.1";
    std::uint16_t port = 0;
    std::string health_path = "/health";
    std::chrono::seconds startup_timeout{3600};
    std::chrono::seconds stop_grace{10};
    std::filesystem::path log_file;  // <log_dir>/<model name, filesystem-safe>.log
    std::size_t ring_lines = 500;
    // Once ready: GET health_path every hang_after/4 (250 ms..30 s); no HTTP answer for hang_after → the
    // engine is hung and is killed (ExitKind::hung). While loading: stopped by a signal for hang_after → the
    // same. Zero turns both off.
    std::chrono::milliseconds hang_after{std::chrono::seconds(120)};
    // loch's secret for this run: the kind hands it to the engine in its environment (not argv: argv is
    // world-readable in /proc); loch sends `Authorization: Bearer <key>`. Never shown in /loch/status.
    std::string api_key;
};

// The spec for `model` on `where`, by its kind (engines/kind.hpp); port 0 = a free port now. Throws
// std::invalid_argument for an impossible combination (e.g. a command template with an unknown placeholder —
// normally caught at config load).
EngineSpec make_engine_spec(const config::Config& cfg, const config::ModelConfig& model,
                            const Placement& where = {}, std::uint16_t port = 0);

// What every kind's spec shares: names, timeouts, log file, watchdog, a fresh secret.
EngineSpec base_spec(const config::Config& cfg, const config::ModelConfig& model, std::uint16_t port);

// The environment that ties an engine's runtime to loch's device numbering: CUDA_DEVICE_ORDER=PCI_BUS_ID
// (CUDA ordinals then follow NVML's, which the probe reads). With `restrict`, also only the admitted
// devices are visible (CUDA_VISIBLE_DEVICES, HIP_VISIBLE_DEVICES, ROCR_VISIBLE_DEVICES: the main device, then
// a split's others, so that inside the engine they are devices 0, 1, …; "-1" = none, for the CPU): an
// engine then neither takes another device by default nor opens a context on one that another engine
// uses. Without it the engine picks the device by a flag.
std::map<std::string, std::string> device_environment(const Placement& where, bool restrict);

// A model name as a file name: characters outside [A-Za-z0-9._-] become '_' ("org/m:7b" → "org_m_7b").
std::string log_file_stem(std::string_view model_name);

// Why an engine must not start with this environment on this device, or nullopt. ggml's unified memory
// (GGML_CUDA_ENABLE_UNIFIED_MEMORY: any value, even "0", turns it on) on an AMD APU through ROCm allocates
// with hipMallocManaged and advises hipMemAdviseSetCoarseGrain: the CPU can no longer read that memory and
// the engine dies of SIGSEGV tens of seconds into a job, and managed memory is charged to the memory cgroup.
// Safe elsewhere: a Vulkan or CPU engine never reads it, and on a discrete NVIDIA GPU it only lets CUDA
// oversubscribe VRAM. `inherited`: the value loch's own environment passes on (engines/process.hpp), used
// when spec.env does not set the variable.
std::optional<std::string> unsafe_environment(const Placement& where, const EngineSpec& spec,
                                              const std::optional<std::string>& inherited);

}  // namespace loch::engines
