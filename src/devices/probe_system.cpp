// The CPU side of the machine: RAM, cgroup limits, kernel command line, TTM/amdgpu parameters, mmap limits,
// the linux-firmware package version and the environment.
#include <algorithm>
#include <regex>
#include <sstream>

#include <fmt/format.h>

#include "devices/memory_cgroup.hpp"
#include "devices/probe.hpp"

namespace loch::devices {

namespace {

ProbedFigure meminfo_field(const Probed<std::string>& meminfo, const std::string& key) {
    if (!meminfo) return ProbedFigure::unknown(meminfo.detail);
    const auto kv = parse_key_values(*meminfo.value, ':');
    const auto it = kv.find(key);
    if (it == kv.end()) return ProbedFigure::unknown("/proc/meminfo: no " + key + " line");
    std::istringstream in(it->second);
    std::string number, unit;
    in >> number >> unit;
    const auto v = parse_u64(number);
    if (!v || (unit != "kB" && !unit.empty()))
        return ProbedFigure::unknown("/proc/meminfo: " + key + " is not \"<number> kB\": \"" + it->second +
                                     "\"");
    const std::uint64_t bytes = unit == "kB" ? *v * 1024 : *v;
    const std::string detail = "/proc/meminfo " + key;
    return ProbedFigure::known({bytes, Source::measured, detail}, detail);
}

void probe_cgroup(const Sysroot& root, SystemInfo& s) {
    auto self = root.read("/proc/self/cgroup");
    if (!self) {
        s.cgroup = Probed<std::string>::unknown(self.detail);
        s.cgroup_max = ProbedFigure::unknown(self.detail);
        s.cgroup_current = ProbedFigure::unknown(self.detail);
        return;
    }
    const auto at = locate_memory_cgroup(root);
    if (!at) {
        s.cgroup =
            Probed<std::string>::unknown("/proc/self/cgroup: no cgroup with a memory controller found");
        s.cgroup_max = ProbedFigure::unknown("no cgroup memory limit found");
        s.cgroup_current = ProbedFigure::unknown("no cgroup memory accounting found");
        return;
    }
    const bool v2 = at->version == 2;
    s.cgroup = Probed<std::string>::known(
        at->path, v2 ? "/proc/self/cgroup (v2)" : "/proc/self/cgroup (v1 memory controller)");
    // v2: the effective limit is the tightest memory.max from the process's cgroup up to the root; v1: the
    // memory controller's hierarchy, or its root when namespaced.
    const auto limit = effective_limit(root, *at);
    if (limit.limit)
        s.cgroup_max = ProbedFigure::known({*limit.limit, Source::measured, limit.file}, limit.file);
    else
        s.cgroup_max = ProbedFigure::unknown(!limit.error.empty() ? limit.error
                                             : v2                 ? "no limit (memory.max is \"max\")"
                                                  : "no limit (memory.limit_in_bytes unlimited)");
    auto cur = root.read_u64(usage_file(*at));
    s.cgroup_current = cur ? ProbedFigure::known({*cur.value, Source::measured, cur.detail}, cur.detail)
                           : ProbedFigure::unknown(cur.detail);
}

std::optional<std::string> firmware_date(const std::string& version) {
    static const std::regex date(R"((20[0-9]{6}))");
    std::smatch m;
    if (std::regex_search(version, m, date)) return m[1].str();
    return std::nullopt;
}

// linux-firmware is a distribution package; loch reads the package databases that are plain text:
// dpkg (Debian/Ubuntu), pacman (Arch), then /usr/share/doc/linux-firmware-<version> (Gentoo, older RPM).
Probed<std::string> probe_linux_firmware(const Sysroot& root) {
    static const std::vector<std::string> packages = {"linux-firmware", "linux-firmware-amdgpu",
                                                      "firmware-amd-graphics"};
    if (auto status = root.read("/var/lib/dpkg/status")) {
        std::istringstream in(*status.value);
        std::string line, package;
        while (std::getline(in, line)) {
            if (line.rfind("Package: ", 0) == 0) package = trim(line.substr(9));
            if (line.empty()) package.clear();
            if (line.rfind("Version: ", 0) == 0 &&
                std::find(packages.begin(), packages.end(), package) != packages.end()) {
                const auto version = trim(line.substr(9));
                if (auto d = firmware_date(version))
                    return Probed<std::string>::known(*d, "/var/lib/dpkg/status: " + package + " " + version);
            }
        }
    }
    for (const auto& dir : {std::string("/var/lib/pacman/local"), std::string("/usr/share/doc")}) {
        for (const auto& name : root.list(dir)) {
            for (const auto& p : packages) {
                if (name.rfind(p + "-", 0) != 0) continue;
                const auto version = name.substr(p.size() + 1);
                if (version.empty() || !std::isdigit(static_cast<unsigned char>(version[0]))) continue;
                if (auto d = firmware_date(version)) return Probed<std::string>::known(*d, dir + "/" + name);
            }
        }
    }
    return Probed<std::string>::unknown(
        "linux-firmware version not found in /var/lib/dpkg/status, /var/lib/pacman/local or /usr/share/doc");
}

Probed<bool> probe_iommu(const Sysroot& root, const Probed<std::string>& cmdline) {
    if (cmdline) {
        std::istringstream in(*cmdline.value);
        std::string tok;
        while (in >> tok) {
            if (tok == "amd_iommu=off" || tok == "iommu=off" || tok == "intel_iommu=off")
                return Probed<bool>::known(false, "/proc/cmdline: " + tok);
        }
    }
    const auto units = root.list("/sys/class/iommu");
    if (!units.empty()) return Probed<bool>::known(true, "/sys/class/iommu: " + units.front());
    return Probed<bool>::known(false, "/sys/class/iommu: no IOMMU units");
}

}  // namespace

Env parse_environ(std::string_view text) {
    Env env;
    const char sep = text.find('\0') != std::string_view::npos ? '\0' : '\n';
    std::size_t start = 0;
    while (start < text.size()) {
        auto end = text.find(sep, start);
        if (end == std::string_view::npos) end = text.size();
        const auto entry = text.substr(start, end - start);
        const auto eq = entry.find('=');
        if (eq != std::string_view::npos && eq > 0)
            env.emplace(std::string(entry.substr(0, eq)), std::string(entry.substr(eq + 1)));
        start = end + 1;
    }
    return env;
}

std::string process_command(const Sysroot& root, int pid) {
    auto r = root.read(fmt::format("/proc/{}/cmdline", pid));
    if (!r) return {};
    std::string cmd = *r.value;
    while (!cmd.empty() && cmd.back() == '\0') cmd.pop_back();
    std::replace(cmd.begin(), cmd.end(), '\0', ' ');
    return trim(cmd);
}

void refresh_memory(const Sysroot& root, SystemInfo& s) {
    const auto meminfo = root.read("/proc/meminfo");
    s.mem_total = meminfo_field(meminfo, "MemTotal");
    s.mem_available = meminfo_field(meminfo, "MemAvailable");
    probe_cgroup(root, s);
}

SystemInfo probe_system(const Sysroot& root, std::optional<Env> env) {
    SystemInfo s;
    const auto meminfo = root.read("/proc/meminfo");
    s.mem_total = meminfo_field(meminfo, "MemTotal");
    s.mem_available = meminfo_field(meminfo, "MemAvailable");
    probe_cgroup(root, s);
    s.cmdline = root.read_line("/proc/cmdline");
    if (!s.cmdline && root.exists("/proc/cmdline"))
        s.cmdline = Probed<std::string>::known("", "/proc/cmdline");
    s.kernel = root.read_line("/proc/sys/kernel/osrelease");
    s.ttm_pages_limit = root.read_u64("/sys/module/ttm/parameters/pages_limit");
    if (auto g = root.read_line("/sys/module/amdgpu/parameters/gttsize")) {
        if (auto v = parse_i64(*g.value))
            s.amdgpu_gttsize_mib = Probed<std::int64_t>::known(*v, g.detail);
        else
            s.amdgpu_gttsize_mib =
                Probed<std::int64_t>::unknown(g.detail + ": not a number: \"" + *g.value + "\"");
    } else {
        s.amdgpu_gttsize_mib = Probed<std::int64_t>::unknown(g.detail);
    }
    s.max_map_count = root.read_u64("/proc/sys/vm/max_map_count");
    s.linux_firmware = probe_linux_firmware(root);
    s.iommu_enabled = probe_iommu(root, s.cmdline);
    if (auto cpuinfo = root.read("/proc/cpuinfo")) {
        const auto kv = parse_key_values(*cpuinfo.value, ':');
        if (auto it = kv.find("model name"); it != kv.end()) s.cpu_name = it->second;
    }
    if (env) {
        s.env = std::move(*env);
        s.env_source = "injected";
    } else if (auto e = root.read("/proc/self/environ")) {
        s.env = parse_environ(*e.value);
        s.env_source = "/proc/self/environ";
    } else {
        s.env_source = e.detail;
    }
    return s;
}

Device probe_cpu(const SystemInfo& system) {
    Device d;
    d.id = "cpu";
    d.vendor = Vendor::cpu;
    d.kind = DeviceKind::cpu;
    d.kind_reason = "host CPU";
    d.name = system.cpu_name.empty() ? "CPU" : system.cpu_name;
    MemoryPool ram;
    ram.kind = PoolKind::host_ram;
    ram.total = system.mem_total;
    ram.free = system.mem_available;
    if (system.mem_total && system.mem_available) {
        const auto t = system.mem_total->bytes, a = system.mem_available->bytes;
        const std::string detail = "/proc/meminfo MemTotal - MemAvailable";
        ram.used = ProbedFigure::known({t > a ? t - a : 0, Source::measured, detail}, detail);
    } else {
        ram.used =
            ProbedFigure::unknown(system.mem_total ? system.mem_available.detail : system.mem_total.detail);
    }
    d.pools.push_back(std::move(ram));
    d.driver_version = system.kernel
                           ? Probed<std::string>::known("Linux " + *system.kernel.value, system.kernel.detail)
                           : system.kernel;
    d.firmware_version = Probed<std::string>::unknown("not applicable");
    d.compute = Probed<std::string>::unknown("not applicable");
    d.vulkan_device_local_heap = ProbedFigure::unknown("not applicable");
    d.vulkan_max_allocation = ProbedFigure::unknown("not applicable");
    d.processes_note = "per-process RAM use is not tracked";
    return d;
}

}  // namespace loch::devices
