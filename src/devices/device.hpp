// devices/device — what each device really has: the data model that `loch devices`, the doctor and the
// broker share.
//
// Every memory number is a loch::MemoryFigure (bytes + where it was read). A number that could not be read is
// not guessed: it is a Probed<> without a value, whose `detail` says why (missing file, parse error, library
// absent). The usable budget of a device is computed by ONE rule, devices/usable.hpp (docs/devices.md).
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "core/memory.hpp"

namespace loch::devices {

// A value read from the system, or the reason it is unknown. `detail` is where the value came from when there
// is one ("/proc/cmdline"), and why there is none otherwise ("/proc/cmdline: missing").
template <class T>
struct Probed {
    std::optional<T> value;
    std::string detail;

    static Probed known(T v, std::string from) { return {std::move(v), std::move(from)}; }
    static Probed unknown(std::string why) { return {std::nullopt, std::move(why)}; }
    bool ok() const { return value.has_value(); }
    explicit operator bool() const { return ok(); }
    const T& operator*() const { return *value; }
    const T* operator->() const { return &*value; }
};

using ProbedFigure = Probed<MemoryFigure>;
using Env = std::map<std::string, std::string>;

// vulkan: a GPU only Vulkan reports (Intel, one whose vendor probe did not run, a software implementation).
enum class Vendor { nvidia, amd, vulkan, cpu };
enum class DeviceKind { discrete, integrated, cpu };
// vram: dedicated (or, on an APU, the BIOS carve-out); vis_vram: the CPU-visible part of it;
// gtt: system RAM the GPU maps (what hipMalloc uses on an APU); host_ram: the CPU's RAM.
enum class PoolKind { vram, vis_vram, gtt, host_ram };

std::string_view to_string(Vendor v);
struct Device;
// The engine backends that can reach a device, best first: NVIDIA cuda, vulkan; AMD rocm, vulkan; a GPU only
// Vulkan reports vulkan; the CPU cpu. Which one is used is the config's or the first that has a build.
std::vector<std::string> backends_of(const Device& d);
std::string_view to_string(DeviceKind k);
std::string_view to_string(PoolKind p);

struct MemoryPool {
    PoolKind kind = PoolKind::vram;
    ProbedFigure total;
    ProbedFigure used;
    ProbedFigure free;
    // Never free: what the driver/firmware keeps for itself (NVML v2). Unknown where the platform does not
    // say; then `used` includes it.
    ProbedFigure reserved = ProbedFigure::unknown("not reported");
};

// Memory one process holds on one device pool, as the platform reports it (NVML, DRM fdinfo).
struct ProcessUsage {
    int pid = 0;
    std::string command;  // /proc/PID/cmdline, arguments joined by spaces; "" when unreadable
    PoolKind pool = PoolKind::vram;
    MemoryFigure bytes;
};

// One term of the usable-memory rule, e.g. {"GTT headroom", 118 GiB from sysfs}.
struct BudgetTerm {
    std::string name;
    MemoryFigure bytes;
};

// What the broker may plan into on this device (devices/usable.hpp computes it).
struct UsableBudget {
    ProbedFigure budget;
    std::vector<BudgetTerm> terms;  // the figures the minimum was taken over
    std::string binding;            // name of the term that set the budget
    std::string rule;               // the rule, in words, for this device kind
};

struct Device {
    std::string id;  // "nvidia:0", "amd:card0", "cpu"
    Vendor vendor = Vendor::cpu;
    // How the GPU runtime numbers it: the NVML index (= the CUDA ordinal under CUDA_DEVICE_ORDER=PCI_BUS_ID,
    // which loch sets for engines), or the HIP ordinal (rank of its KFD topology node among the GPU nodes).
    // Unset for the CPU and when the probe cannot tell. Never derived from the digits of `id`.
    std::optional<int> ordinal;
    DeviceKind kind = DeviceKind::cpu;
    std::string kind_reason;  // why loch thinks it is integrated / discrete
    std::string name;
    std::string pci_slot;  // "0000:c5:00.0" when known
    std::string pci_device_id;
    std::vector<MemoryPool> pools;
    std::vector<ProcessUsage> processes;
    std::string processes_note;  // how per-process usage was obtained, or why it is partial / absent
    Probed<std::string> driver_version;
    Probed<std::string>
        firmware_version;         // VBIOS / device firmware; the linux-firmware package is in SystemInfo
    Probed<std::string> compute;  // CUDA compute capability "9.0" or AMD gfx target "gfx1151"
    ProbedFigure vulkan_device_local_heap;  // largest DEVICE_LOCAL heap libvulkan reports for this device
    // The largest single buffer a Vulkan engine can allocate there: ggml-vulkan takes
    // min(maxMemoryAllocationSize, maxBufferSize) (4 GiB on RADV), and a tensor above it fails however large
    // the heap is.
    ProbedFigure vulkan_max_allocation;
    // Its index among libvulkan's physical devices: what GGML_VK_VISIBLE_DEVICES names. Unset where Vulkan
    // was not probed or did not report this device.
    std::optional<int> vulkan_index;
    // A software implementation (Vulkan deviceType CPU: Mesa's lavapipe). It computes on the CPU's cores in
    // the CPU's RAM, so loch offers it only where the config names it under `devices:`.
    bool software = false;
    UsableBudget usable;

    const MemoryPool* pool(PoolKind k) const;
};

struct SystemInfo {
    ProbedFigure mem_total;      // /proc/meminfo MemTotal
    ProbedFigure mem_available;  // /proc/meminfo MemAvailable
    Probed<std::string> cgroup;  // the process's cgroup path, from /proc/self/cgroup
    ProbedFigure cgroup_max;     // unknown with "no limit" when memory.max is "max"
    ProbedFigure cgroup_current;
    Probed<std::string> cmdline;              // /proc/cmdline
    Probed<std::string> kernel;               // /proc/sys/kernel/osrelease
    Probed<std::uint64_t> ttm_pages_limit;    // /sys/module/ttm/parameters/pages_limit (4 KiB pages)
    Probed<std::int64_t> amdgpu_gttsize_mib;  // /sys/module/amdgpu/parameters/gttsize (-1 = driver default)
    Probed<std::uint64_t> max_map_count;      // /proc/sys/vm/max_map_count
    Probed<std::string> linux_firmware;       // package version, "20251125" style date when discoverable
    Probed<bool> iommu_enabled;               // from the command line and /sys/class/iommu
    std::string cpu_name;
    Env env;                 // the environment loch (and the engines it spawns) run with
    std::string env_source;  // "/proc/self/environ" or "injected"

    bool cgroup_limited() const { return cgroup_max.ok(); }
};

struct DeviceReport {
    SystemInfo system;
    std::vector<Device> devices;     // GPUs first, the CPU last
    std::vector<std::string> notes;  // probes that did not run and why ("NVML: libnvidia-ml.so.1 not found")

    const Device* find(std::string_view id) const;
};

}  // namespace loch::devices
