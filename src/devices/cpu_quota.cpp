// devices/cpu_quota — the CPUs a CFS quota allows (cpu_quota.hpp says where it is read).
#include "devices/cpu_quota.hpp"
#include "devices/memory_cgroup.hpp"

#include <algorithm>
#include <sstream>
#include <string>

namespace loch::devices {

namespace {

// "<quota> <period>" → quota / period; "max …" or anything malformed → none.
std::optional<double> quota_of(const std::string& quota, const std::string& period) {
    try {
        const double q = std::stod(quota), p = std::stod(period);
        if (q > 0 && p > 0) return q / p;
    } catch (const std::exception&) {
    }
    return std::nullopt;
}

std::optional<double> tighter(std::optional<double> a, std::optional<double> b) {
    if (!a) return b;
    if (!b) return a;
    return std::min(*a, *b);
}

}  // namespace

std::optional<double> cpu_quota(const Sysroot& root) {
    auto self = root.read("/proc/self/cgroup");
    if (!self) return std::nullopt;
    const auto [v2_path, v1_path] = cgroup_paths(*self.value, "cpu");
    std::optional<double> found;
    const std::string top = "/sys/fs/cgroup";
    if (!v2_path.empty() && v2_path.front() == '/')
        for (std::string dir = v2_path == "/" ? top : top + v2_path;; dir = dir.substr(0, dir.rfind('/'))) {
            if (auto text = root.read_line(dir + "/cpu.max")) {
                std::istringstream words(*text.value);
                std::string quota, period;
                words >> quota >> period;
                found = tighter(found, quota_of(quota, period));
            }
            if (dir.size() <= top.size()) break;
        }
    if (found || v1_path.empty()) return found;
    for (const std::string base : {"/sys/fs/cgroup/cpu,cpuacct", "/sys/fs/cgroup/cpu"}) {
        // The controller's hierarchy, or its root when the container has its own cgroup namespace.
        for (const auto& dir : {base + (v1_path == "/" ? "" : v1_path), base}) {
            auto quota = root.read_line(dir + "/cpu.cfs_quota_us");
            auto period = root.read_line(dir + "/cpu.cfs_period_us");
            if (quota && period) return quota_of(*quota.value, *period.value);
        }
    }
    return std::nullopt;
}

}  // namespace loch::devices
