// broker/device_source — the broker's view of the devices: total and used per device id, refreshed on the
// broker's tick (and after an engine stops, to see that its memory is really free).
//
// ProbedDevices reads them through the devices module (the same probes `loch devices` prints);
// FixedDevices is for configurations that name only a budget (and for the unit tests of the broker logic).
#pragma once

#include <chrono>
#include <filesystem>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "core/memory.hpp"
#include "devices/device.hpp"
#include "devices/memory_cgroup.hpp"
#include "devices/processes.hpp"

namespace loch::broker {

struct DeviceSnapshot {
    std::string id;
    MemoryFigure total;
    std::optional<MemoryFigure>
        used;  // whole device, including loch's engines; unknown → no outside use known
    std::optional<MemoryFigure> driver_reserved;  // never free (NVML v2 `reserved`)
    std::map<int, std::uint64_t> process_bytes;   // per PID, where the platform reports it (NVML, fdinfo)
    std::string name;
    std::string backend = "cpu";  // how engines reach it natively: "cpu" | "cuda" | "rocm" | "vulkan"
    // The backends that can reach it, best first (NVIDIA: cuda, vulkan; AMD: rocm, vulkan; a Vulkan-only
    // device: vulkan): the broker takes the first one an engine build exists for
    // (config::Config::backend_for). Empty: `backend` alone.
    std::vector<std::string> backends;
    std::optional<int> vulkan_index;  // devices::Device::vulkan_index: its number for a Vulkan engine
    std::optional<int> ordinal;       // devices::Device::ordinal
    // The largest Vulkan DEVICE_LOCAL heap (RADV on an APU: ~4 GiB, whatever GTT holds); what a Vulkan
    // engine can allocate at most.
    std::optional<MemoryFigure> vulkan_heap;
    // The largest single buffer a Vulkan engine can allocate there (maxMemoryAllocationSize).
    std::optional<MemoryFigure> vulkan_max_allocation;
    // An APU: its pool is the machine's RAM (GTT), charged like the CPU's where the kernel does.
    bool unified = false;
    // What would give it more room, from the platform (an APU's carve-out above its GTT ceiling: the BIOS
    // setting and kernel parameters, devices/apu_tuning.hpp); "" when nothing is known.
    std::string advice;
    std::string driver;  // its driver's version, where probed (a remembered footprint is per driver)
};

// The snapshot of one probed device (its allocation pool: VRAM, GTT on an APU, RAM for the CPU); nullopt
// when that pool's size is unknown.
std::optional<DeviceSnapshot> snapshot_of(const devices::Device& d);

// The CPU's (or an APU's) snapshot inside a memory cgroup whose limit is below its pool (a container, a pod,
// a unit with MemoryMax=): the limit is the capacity, and what is free is the lesser of the limit less the
// cgroup's working set and what the pool has free. Engines are loch's children and are charged to it, so
// planning against the host's RAM would admit what the kernel then SIGKILLs. An APU's GTT allocations are
// charged where the kernel accounts TTM pages to the memory cgroup, and always with unified memory (the
// story behind loch: a container limit killed sd-server on a Strix Halo): capped the same way, never
// under. Unchanged without a limit.
void cap_to_cgroup(DeviceSnapshot& cpu, const devices::MemoryCgroup& cgroup);

class DeviceSource {
  public:
    virtual ~DeviceSource() = default;
    virtual std::vector<DeviceSnapshot> snapshot() = 0;
    // Resident memory of a process on the CPU (RSS: anonymous + mapped file pages); nullopt if unknown.
    virtual std::optional<std::uint64_t> resident_bytes(int /*pid*/) { return std::nullopt; }
    // The processes of a process group (an engine and the workers it forked: vLLM's engine core, …).
    virtual std::vector<int> group_members(int pgid) { return {pgid}; }
    // Naming the other programs (devices/processes.hpp): who a process is, and the largest resident ones.
    virtual std::optional<devices::ProcessInfo> describe(int /*pid*/) { return std::nullopt; }
    virtual std::vector<std::pair<int, std::uint64_t>> largest_resident(std::size_t /*n*/) { return {}; }
    // loch's memory cgroup: its limit, use and oom_kill counter (devices/memory_cgroup.hpp), read when an
    // engine starts and when one dies of a SIGKILL loch did not send.
    virtual std::optional<devices::MemoryCgroup> memory_cgroup() { return std::nullopt; }
};

// The live machine via devices::probe() (GPUs through NVML / sysfs, the CPU through /proc/meminfo).
// Costs ~nothing when idle: the system facts that do not change (firmware, kernel, environment) are
// probed once and only the memory counters re-read; a missing NVML library is looked for again once a
// minute, not every tick.
class ProbedDevices : public DeviceSource {
  public:
    // `nvml_library`: what to dlopen for NVIDIA GPUs (LOCH_NVML_LIBRARY overrides it for `loch serve`, as for
    // `loch devices`).
    // `sysroot`: "/" for this machine, or a captured tree (`loch serve --sysroot`: replays and tests plan
    // for that machine while the engines run here). `vulkan`: probe libvulkan once (a Vulkan engine build
    // exists, or a device is configured with backend: vulkan); a captured tree's vulkan.json is read
    // instead. `software_vulkan`: offer software Vulkan devices too (the config names a `vulkan:N` device).
    explicit ProbedDevices(std::string nvml_library = "libnvidia-ml.so.1",
                           std::filesystem::path sysroot = "/", bool vulkan = false,
                           bool software_vulkan = false)
        : nvml_(std::move(nvml_library)),
          root_(std::move(sysroot)),
          vulkan_(vulkan),
          software_vulkan_(software_vulkan) {}
    std::vector<DeviceSnapshot> snapshot() override;
    std::optional<std::uint64_t> resident_bytes(int pid) override;  // /proc/PID/status VmRSS
    // Found by descent from the members known (devices::group_by_descent: a few reads per member); the
    // whole of /proc (every process's stat) is read for a group at most every kGroupRescanEvery, which finds
    // an orphaned member the descent cannot. (A scan each tick was most of an idle loch's CPU: issue 55.)
    // Between two finds a group's members are as last found, for kGroupRefindEvery.
    std::vector<int> group_members(int pgid) override;
    static constexpr std::chrono::minutes kGroupRescanEvery{5};
    static constexpr std::chrono::seconds kGroupRefindEvery{5};
    std::optional<devices::ProcessInfo> describe(int pid) override { return devices::describe_process(pid); }
    std::vector<std::pair<int, std::uint64_t>> largest_resident(std::size_t n) override {
        return devices::largest_resident(n);
    }
    std::optional<devices::MemoryCgroup> memory_cgroup() override {
        return devices::read_memory_cgroup(devices::Sysroot{root_});
    }

  private:
    std::string nvml_;
    std::filesystem::path root_;
    bool vulkan_ = false;
    bool software_vulkan_ = false;
    // The devices as the Vulkan probe left them, probed once (its figures are the driver's constants): the
    // others' Vulkan figures by id, and the devices only Vulkan reports.
    std::optional<std::vector<devices::Device>> vulkan_probed_;
    std::optional<devices::SystemInfo> system_;
    std::chrono::steady_clock::time_point nvml_retry_at_{};
    struct Group {
        std::vector<int> members;
        std::chrono::steady_clock::time_point scanned;  // the last read of all of /proc for it
        std::chrono::steady_clock::time_point found;    // the last time its members were looked for
        std::chrono::steady_clock::time_point asked;
    };
    std::map<int, Group> groups_;
};

class FixedDevices : public DeviceSource {
  public:
    explicit FixedDevices(std::vector<DeviceSnapshot> devices) : devices_(std::move(devices)) {}
    std::vector<DeviceSnapshot> snapshot() override { return devices_; }

  private:
    std::vector<DeviceSnapshot> devices_;
};

}  // namespace loch::broker
