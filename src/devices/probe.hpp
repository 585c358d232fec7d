// devices/probe — find the devices of this machine (or of a captured tree under --sysroot) and fill the
// device model: NVIDIA through NVML (dlopen, no link dependency, no CUDA context), AMD from sysfs, KFD
// topology and DRM fdinfo, the CPU and the platform settings from /proc and cgroup, Vulkan heaps optionally.
//
// Sources of every figure are listed in docs/devices.md. No probe throws: what cannot be read is reported as
// unknown with the reason, and probes that did not run leave a note in DeviceReport::notes.
#pragma once

#include <filesystem>
#include <optional>
#include <string>
#include <vector>

#include "devices/device.hpp"
#include "devices/sysroot.hpp"

namespace loch::devices {

struct ProbeOptions {
    std::filesystem::path sysroot = "/";
    // The environment to judge (engines inherit it). nullopt: read <sysroot>/proc/self/environ.
    std::optional<Env> env;
    // NVML library to dlopen; "" means NVML is not probed (the report says so).
    std::string nvml_library;
    // dlopen libvulkan.so.1 and read heap sizes (only meaningful on the live system).
    bool probe_vulkan = false;
    // Report software Vulkan devices (lavapipe) too; the broker asks for them only when the config names one.
    bool software_vulkan = false;
};

// Options for the CLI: on the live system NVML is libnvidia-ml.so.1 and Vulkan is probed; on a captured
// tree neither runs (they would describe this machine, not the tree). LOCH_NVML_LIBRARY in `process_env`
// overrides the NVML library in both cases (tests point it at the NVML test double).
ProbeOptions default_probe_options(const std::filesystem::path& sysroot, const Env& process_env);

DeviceReport probe(const ProbeOptions& options);

// The individual probes, for tests and for the broker's periodic refresh.
SystemInfo probe_system(const Sysroot& root, std::optional<Env> env);
// Re-reads only what changes from second to second (/proc/meminfo, the cgroup's current use): the broker's
// tick refreshes a SystemInfo with it instead of probing firmware, kernel and environment again.
void refresh_memory(const Sysroot& root, SystemInfo& s);
std::vector<Device> probe_amd(const Sysroot& root);
Device probe_cpu(const SystemInfo& system);

struct NvmlProbe {
    std::vector<Device> devices;
    std::string note;  // why NVML gave nothing ("dlopen libnvidia-ml.so.1: ... not found"), "" on success
};
// `root` is used only to name the processes NVML reports (/proc/PID/cmdline).
NvmlProbe probe_nvidia(const std::string& library, const Sysroot& root);

// Fills Device::vulkan_device_local_heap, vulkan_max_allocation and vulkan_index for the devices libvulkan
// knows (AMD by PCI device id; NVIDIA in enumeration order), and adds a `vulkan:N` device for each physical
// device of a vendor no other probe reported (N: its Vulkan index), software ones only when `software`.
// Returns a note when it cannot.
std::string probe_vulkan(std::vector<Device>& devices, bool software);
// The same from a captured tree's `vulkan.json` (docs/devices.md, "Captured trees"):
//   {"devices": [{"vendor_id": "0x1002", "device_id": "0x1586", "name": "…", "type": "integrated",
//                 "device_local_heap_bytes": N, "max_allocation_bytes": N}]}
// (its place in the list is its Vulkan index; "type": discrete | integrated | cpu, as Vulkan's deviceType).
// Returns a note when there is no such file or it cannot be read.
std::string probe_vulkan_capture(const Sysroot& root, std::vector<Device>& devices, bool software);

// This process's environment (the C `environ`), for the CLI to inject; probes never call getenv.
Env process_environment();

// "KEY=VALUE" entries separated by NUL (as in /proc/PID/environ) or, in hand-written fixtures, newlines.
Env parse_environ(std::string_view text);
// Contents of /proc/PID/cmdline with NULs as spaces; "" when unreadable.
std::string process_command(const Sysroot& root, int pid);

}  // namespace loch::devices
