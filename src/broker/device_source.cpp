#include "broker/device_source.hpp"

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <sstream>

#include <fmt/format.h>

#include "devices/apu_tuning.hpp"
#include "devices/probe.hpp"
#include "devices/processes.hpp"

namespace loch::broker {

std::vector<DeviceSnapshot> ProbedDevices::snapshot() {
    std::vector<DeviceSnapshot> out;
    // The individual probes (not devices::probe()): no Vulkan, no firmware, nothing the broker does not use.
    const devices::Sysroot root(root_);
    if (!system_)
        system_ = devices::probe_system(
            root, root.is_live() ? std::optional<devices::Env>(devices::Env{}) : std::nullopt);
    else
        devices::refresh_memory(root, *system_);
    const auto& system = *system_;
    std::vector<devices::Device> found;
    const auto now = std::chrono::steady_clock::now();
    if (!nvml_.empty() && now >= nvml_retry_at_) {  // "" : not probed (a captured tree)
        auto nv = devices::probe_nvidia(nvml_, root);
        // No library (a machine without the NVIDIA driver): a failing dlopen each second is wasted work.
        if (nv.devices.empty() && nv.note.find("dlopen") != std::string::npos)
            nvml_retry_at_ = now + std::chrono::seconds(60);
        found = std::move(nv.devices);
    }
    for (auto& d : devices::probe_amd(root)) found.push_back(std::move(d));
    if (vulkan_ || !root.is_live()) {
        // Once, at the first snapshot (Broker::start's, before the loop runs): libvulkan's instance is not a
        // per-tick cost, and the figures are the driver's constants.
        if (!vulkan_probed_) {
            vulkan_probed_ = found;
            if (root.is_live())
                devices::probe_vulkan(*vulkan_probed_, software_vulkan_);
            else
                devices::probe_vulkan_capture(root, *vulkan_probed_, software_vulkan_);
        }
        for (auto& d : found)
            for (const auto& p : *vulkan_probed_)
                if (p.id == d.id) {
                    d.vulkan_device_local_heap = p.vulkan_device_local_heap;
                    d.vulkan_max_allocation = p.vulkan_max_allocation;
                    d.vulkan_index = p.vulkan_index;
                }
        for (const auto& p : *vulkan_probed_)
            if (p.vendor == devices::Vendor::vulkan) found.push_back(p);
    }
    found.push_back(devices::probe_cpu(system));
    for (const auto& d : found)
        if (auto s = snapshot_of(d)) {
            if (const auto g = devices::gtt_ceiling_below_carve_out(d, system))
                s->advice = fmt::format(
                    "ROCm allocates from GTT here ({}, {}), not from the {} BIOS carve-out that rocm-smi "
                    "reports: "
                    "{}",
                    human_bytes(g->ceiling), g->ceiling_from, human_bytes(g->carve_out), g->fix());
            out.push_back(std::move(*s));
        }
    if (system.cgroup_limited())
        if (const auto cgroup = devices::read_memory_cgroup(root))
            for (auto& s : out)
                if (s.id == "cpu" || s.unified) cap_to_cgroup(s, *cgroup);
    return out;
}

void cap_to_cgroup(DeviceSnapshot& cpu, const devices::MemoryCgroup& cgroup) {
    if (!cgroup.limit || *cgroup.limit >= cpu.total.bytes) return;
    const std::uint64_t limit = *cgroup.limit;
    const std::uint64_t working = std::min(limit, cgroup.working_set().value_or(0));
    const std::uint64_t pool_free =
        cpu.used ? cpu.total.bytes - std::min(cpu.total.bytes, cpu.used->bytes) : limit;
    const std::uint64_t free = std::min(limit - working, pool_free);
    cpu.total = {limit, Source::measured, "the memory cgroup's limit (" + cgroup.limit_file + ")"};
    cpu.used = MemoryFigure{
        limit - free, Source::measured,
        free < limit - working
            ? std::string(cpu.unified
                              ? "the limit less the GTT pool's free memory (less than the cgroup has left)"
                              : "the limit less the machine's MemAvailable (less than the cgroup has left)")
            : "the cgroup's working set (memory use less inactive page cache)"};
}

std::optional<DeviceSnapshot> snapshot_of(const devices::Device& d) {
    // The pool engines allocate from: VRAM on a discrete GPU, GTT on an APU, RAM on the CPU.
    const devices::MemoryPool* pool = nullptr;
    if (d.kind == devices::DeviceKind::cpu)
        pool = d.pool(devices::PoolKind::host_ram);
    else if (d.kind == devices::DeviceKind::integrated)
        pool = d.pool(devices::PoolKind::gtt);
    if (!pool) pool = d.pool(devices::PoolKind::vram);
    if (!pool || !pool->total) return std::nullopt;
    DeviceSnapshot s;
    s.id = d.id;
    s.name = d.name;
    s.total = *pool->total;
    if (pool->used) s.used = *pool->used;
    if (pool->reserved) s.driver_reserved = *pool->reserved;
    for (const auto& pu : d.processes)
        if (pu.pool == pool->kind) s.process_bytes[pu.pid] += pu.bytes.bytes;
    s.backends = devices::backends_of(d);
    s.backend = s.backends.front();
    s.ordinal = d.ordinal;
    s.vulkan_index = d.vulkan_index;
    if (d.driver_version) s.driver = *d.driver_version;
    if (d.vulkan_device_local_heap) s.vulkan_heap = *d.vulkan_device_local_heap;
    if (d.vulkan_max_allocation) s.vulkan_max_allocation = *d.vulkan_max_allocation;
    s.unified = d.kind == devices::DeviceKind::integrated;
    return s;
}

std::vector<int> ProbedDevices::group_members(int pgid) {
    const auto now = std::chrono::steady_clock::now();
    for (auto it = groups_.begin(); it != groups_.end();)  // forget groups not asked about for a while
        it = now - it->second.asked > std::chrono::minutes(2) ? groups_.erase(it) : std::next(it);
    auto it = groups_.find(pgid);
    if (it != groups_.end() && now - it->second.scanned < kGroupRescanEvery) {
        it->second.asked = now;
        // Asked again within a tick or two (a busy tick asks for each engine twice): as found.
        if (now - it->second.found < kGroupRefindEvery) return it->second.members;
        // Known: its members and their descendants (a few reads), not every process on the machine.
        if (auto members = devices::group_by_descent(pgid, it->second.members)) {
            it->second.members = std::move(*members);
            it->second.found = now;
            return it->second.members;
        }
        // No children files here: the scan below, at most every 30 s.
        if (now - it->second.scanned < std::chrono::seconds(30)) return it->second.members;
    }
    auto members = devices::group_by_scan(pgid);
    groups_[pgid] = {members, now, now, now};
    return members;
}

std::optional<std::uint64_t> ProbedDevices::resident_bytes(int pid) {
    std::ifstream in("/proc/" + std::to_string(pid) + "/status");
    std::string line;
    while (std::getline(in, line)) {
        if (!line.starts_with("VmRSS:")) continue;
        std::istringstream ss(line.substr(6));
        std::uint64_t kib = 0;
        if (ss >> kib) return kib * 1024;
    }
    return std::nullopt;
}

}  // namespace loch::broker
