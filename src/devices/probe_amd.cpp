// AMD GPUs: amdgpu's sysfs memory counters, the KFD topology (gfx target, APU or not) and DRM fdinfo
// (which process holds how much VRAM/GTT).
#include <fmt/format.h>

#include <cstdlib>
#include <regex>
#include <set>
#include <sstream>

#include "devices/probe.hpp"

namespace loch::devices {

namespace {

struct KfdNode {
    std::string id;
    std::string slot;  // PCI slot from domain + location_id
    std::map<std::string, std::string> props;
    std::uint64_t num(const std::string& key) const {
        auto it = props.find(key);
        if (it == props.end()) return 0;
        return parse_u64(it->second).value_or(0);
    }
};

std::string pci_slot(std::uint64_t domain, std::uint64_t location) {
    return fmt::format("{:04x}:{:02x}:{:02x}.{:x}", domain, (location >> 8) & 0xff, (location >> 3) & 0x1f,
                       location & 0x7);
}

std::vector<KfdNode> read_kfd(const Sysroot& root) {
    std::vector<KfdNode> nodes;
    const std::string base = "/sys/class/kfd/kfd/topology/nodes";
    for (const auto& id : root.list(base)) {
        auto text = root.read(base + "/" + id + "/properties");
        if (!text) continue;
        KfdNode n{id, {}, parse_key_values(*text.value, ' ')};
        if (n.num("simd_count") == 0) continue;  // a CPU-only node
        n.slot = pci_slot(n.num("domain"), n.num("location_id"));
        nodes.push_back(std::move(n));
    }
    return nodes;
}

// gfx_target_version 110501 → "gfx1151" (major, minor and stepping; minor and stepping in hex as LLVM names
// them).
std::string gfx_name(std::uint64_t v) {
    return fmt::format("gfx{}{:x}{:x}", v / 10000, (v / 100) % 100, v % 100);
}

// GPU targets that only exist as integrated graphics (APUs sharing the CPU's RAM).
bool apu_only_target(const std::string& gfx) {
    static const std::set<std::string> apus = {"gfx801",  "gfx902",  "gfx909",  "gfx90c",  "gfx1013",
                                               "gfx1033", "gfx1035", "gfx1036", "gfx1037", "gfx1103",
                                               "gfx1150", "gfx1151", "gfx1152", "gfx1153"};
    return apus.count(gfx) > 0;
}

std::string marketing_name(const std::string& device_id, const std::string& gfx) {
    static const std::map<std::string, std::string> names = {
        {"0x1586", "AMD Radeon 8060S (Strix Halo)"},
        {"0x150e", "AMD Radeon 890M (Strix Point)"},
        {"0x15bf", "AMD Radeon 780M (Phoenix)"},
        {"0x15c8", "AMD Radeon 740M (Phoenix2)"},
        {"0x1681", "AMD Radeon 680M (Rembrandt)"},
        {"0x744c", "AMD Radeon RX 7900 XTX / XT"},
        {"0x7448", "AMD Radeon PRO W7900"},
        {"0x73bf", "AMD Radeon RX 6900 XT / 6800 XT"},
        {"0x7480", "AMD Radeon RX 7600"},
        {"0x74a1", "AMD Instinct MI300X"},
    };
    if (auto it = names.find(device_id); it != names.end()) return it->second;
    return fmt::format("AMD GPU {}{}", device_id.empty() ? "?" : device_id,
                       gfx.empty() ? "" : " (" + gfx + ")");
}

// "12345 KiB" → bytes.
std::optional<std::uint64_t> parse_size(const std::string& s) {
    std::istringstream in(s);
    std::string number, unit;
    in >> number >> unit;
    auto v = parse_u64(number);
    if (!v) return std::nullopt;
    if (unit.empty() || unit == "B") return *v;
    if (unit == "KiB" || unit == "kB") return *v * 1024;
    if (unit == "MiB") return *v * kMiB;
    if (unit == "GiB") return *v * kGiB;
    return std::nullopt;
}

struct DrmClient {
    int pid = 0;
    std::string pdev;
    std::string path;  // the fdinfo file it came from
    std::map<PoolKind, std::uint64_t> bytes;
};

struct FdinfoScan {
    std::vector<DrmClient> clients;
    int processes_seen = 0;
    int processes_unreadable = 0;
};

// Every open DRM file of every process: /proc/PID/fdinfo/FD with drm-driver: amdgpu. Clients that share a
// drm-client-id (the same file opened through dup/fork) are counted once.
FdinfoScan scan_fdinfo(const Sysroot& root) {
    static const std::regex numeric("[0-9]+");
    FdinfoScan scan;
    std::set<std::pair<std::string, std::string>> seen_clients;
    for (const auto& pid_name : root.list("/proc")) {
        if (!std::regex_match(pid_name, numeric)) continue;
        ++scan.processes_seen;
        const std::string dir = "/proc/" + pid_name + "/fdinfo";
        const auto fds = root.try_list(dir);
        if (!fds) {
            if (root.exists("/proc/" + pid_name)) ++scan.processes_unreadable;
            continue;
        }
        for (const auto& fd : *fds) {
            auto text = root.read(dir + "/" + fd);
            if (!text) continue;
            const auto kv = parse_key_values(*text.value, ':');
            auto drv = kv.find("drm-driver");
            if (drv == kv.end() || drv->second != "amdgpu") continue;
            DrmClient c;
            c.pid = static_cast<int>(parse_u64(pid_name).value_or(0));
            if (auto p = kv.find("drm-pdev"); p != kv.end()) c.pdev = p->second;
            c.path = dir + "/" + fd;
            const std::string client_id = kv.count("drm-client-id") ? kv.at("drm-client-id") : c.path;
            if (!seen_clients.insert({c.pdev, client_id}).second) continue;
            for (auto [region, pool] : {std::pair{"vram", PoolKind::vram}, std::pair{"gtt", PoolKind::gtt}}) {
                // drm-resident-* is the generic DRM key (Linux 6.x), drm-memory-* amdgpu's older one.
                for (const std::string& key :
                     {std::string("drm-resident-") + region, std::string("drm-memory-") + region}) {
                    auto it = kv.find(key);
                    if (it == kv.end()) continue;
                    if (auto b = parse_size(it->second)) c.bytes[pool] = *b;
                    break;
                }
            }
            scan.clients.push_back(std::move(c));
        }
    }
    return scan;
}

ProbedFigure sysfs_figure(const Sysroot& root, const std::string& path) {
    auto v = root.read_u64(path);
    if (!v) return ProbedFigure::unknown(v.detail);
    const std::string detail = "sysfs " + path.substr(std::string("/sys/class/drm/").size());
    return ProbedFigure::known({*v.value, Source::measured, detail}, detail);
}

MemoryPool sysfs_pool(const Sysroot& root, const std::string& device_dir, PoolKind kind, const char* name) {
    MemoryPool p;
    p.kind = kind;
    p.total = sysfs_figure(root, device_dir + "/mem_info_" + name + "_total");
    p.used = sysfs_figure(root, device_dir + "/mem_info_" + name + "_used");
    if (p.total && p.used) {
        const auto t = p.total->bytes, u = p.used->bytes;
        const std::string detail =
            fmt::format("{} - {}", p.total->detail, p.used->detail.substr(p.used->detail.rfind('/') + 1));
        if (u > t)
            p.free = ProbedFigure::unknown(fmt::format("used {} exceeds total {} ({})", u, t, detail));
        else
            p.free = ProbedFigure::known({t - u, Source::measured, detail}, detail);
    } else {
        p.free = ProbedFigure::unknown(p.total ? p.used.detail : p.total.detail);
    }
    return p;
}

}  // namespace

std::vector<Device> probe_amd(const Sysroot& root) {
    static const std::regex card_re("card[0-9]+");
    std::vector<Device> out;
    const auto kfd = read_kfd(root);
    std::optional<FdinfoScan> fdinfo;  // scanned once, only when there is an AMD GPU
    const auto kernel = root.read_line("/proc/sys/kernel/osrelease");

    for (const auto& card : root.list("/sys/class/drm")) {
        if (!std::regex_match(card, card_re)) continue;
        const std::string dev = "/sys/class/drm/" + card + "/device";
        auto vendor = root.read_line(dev + "/vendor");
        if (!vendor || *vendor.value != "0x1002") continue;

        Device d;
        d.id = "amd:" + card;
        d.vendor = Vendor::amd;
        if (auto id = root.read_line(dev + "/device")) d.pci_device_id = *id.value;
        if (auto uevent = root.read(dev + "/uevent")) {
            const auto kv = parse_key_values(*uevent.value, '=');
            if (auto it = kv.find("PCI_SLOT_NAME"); it != kv.end()) d.pci_slot = it->second;
        }
        if (d.pci_slot.empty() && root.is_live()) {
            std::error_code ec;
            d.pci_slot = std::filesystem::canonical(root.resolve(dev), ec).filename().string();
        }

        const KfdNode* node = nullptr;
        for (const auto& n : kfd)
            if (!d.pci_slot.empty() && n.slot == d.pci_slot) node = &n;
        std::string gfx;
        if (node && node->num("gfx_target_version") > 0) {
            // HIP numbers the GPU agents in KFD node order (node 0 is usually the CPU).
            const auto node_no = [](const KfdNode& n) { return std::strtol(n.id.c_str(), nullptr, 10); };
            int ordinal = 0;
            for (const auto& n : kfd)
                if (n.num("gfx_target_version") > 0 && node_no(n) < node_no(*node)) ++ordinal;
            d.ordinal = ordinal;
            gfx = gfx_name(node->num("gfx_target_version"));
            d.compute =
                Probed<std::string>::known(gfx, fmt::format("KFD topology node {} gfx_target_version {}",
                                                            node->id, node->props.at("gfx_target_version")));
        } else {
            d.compute = Probed<std::string>::unknown(
                node ? "KFD topology node " + node->id + ": no gfx_target_version"
                     : "no KFD topology node with PCI slot " + (d.pci_slot.empty() ? "?" : d.pci_slot));
        }

        if (node && node->num("cpu_cores_count") > 0) {
            d.kind = DeviceKind::integrated;
            d.kind_reason = "KFD topology node " + node->id + " has CPU cores and SIMDs (APU)";
        } else if (apu_only_target(gfx)) {
            d.kind = DeviceKind::integrated;
            d.kind_reason = gfx + " exists only as integrated graphics (APU): memory is the CPU's RAM";
        } else {
            d.kind = DeviceKind::discrete;
            d.kind_reason = gfx.empty() ? "no APU evidence (no KFD gfx target); assumed discrete"
                                        : gfx + " is a discrete GPU target";
        }
        d.name = marketing_name(d.pci_device_id, gfx);

        d.pools.push_back(sysfs_pool(root, dev, PoolKind::vram, "vram"));
        d.pools.push_back(sysfs_pool(root, dev, PoolKind::vis_vram, "vis_vram"));
        d.pools.push_back(sysfs_pool(root, dev, PoolKind::gtt, "gtt"));

        if (auto v = root.read_line("/sys/module/amdgpu/version"))
            d.driver_version = Probed<std::string>::known("amdgpu " + *v.value, v.detail);
        else if (kernel)
            d.driver_version =
                Probed<std::string>::known("amdgpu (Linux " + *kernel.value + ")", kernel.detail);
        else
            d.driver_version = Probed<std::string>::unknown(kernel.detail);
        auto vbios = root.read_line(dev + "/vbios_version");
        d.firmware_version =
            vbios ? Probed<std::string>::known("VBIOS " + *vbios.value, vbios.detail) : vbios;
        d.vulkan_device_local_heap = ProbedFigure::unknown("Vulkan not probed");
        d.vulkan_max_allocation = ProbedFigure::unknown("Vulkan not probed");

        if (!fdinfo) fdinfo = scan_fdinfo(root);
        std::map<std::pair<int, PoolKind>, std::pair<std::uint64_t, std::string>> per_process;
        for (const auto& c : fdinfo->clients) {
            if (c.pdev != d.pci_slot) continue;
            for (const auto& [pool, bytes] : c.bytes) {
                auto& slot = per_process[{c.pid, pool}];
                slot.first += bytes;
                if (slot.second.empty()) slot.second = c.path;
            }
        }
        for (const auto& [key, value] : per_process) {
            if (value.first == 0) continue;
            d.processes.push_back({key.first,
                                   process_command(root, key.first),
                                   key.second,
                                   {value.first, Source::measured, "DRM fdinfo " + value.second}});
        }
        d.processes_note = fmt::format("DRM fdinfo of {} processes", fdinfo->processes_seen);
        if (fdinfo->processes_unreadable > 0)
            d.processes_note +=
                fmt::format("; {} processes' fdinfo unreadable (other users: run as root to see them)",
                            fdinfo->processes_unreadable);
        out.push_back(std::move(d));
    }
    return out;
}

}  // namespace loch::devices
