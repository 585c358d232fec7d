#include "devices/memory_cgroup.hpp"

#include <sstream>

namespace loch::devices {

namespace {
constexpr std::uint64_t kNoLimit = 1ull << 60;  // v1 reports "no limit" as a huge page-rounded number

std::optional<std::uint64_t> stat_value(const Sysroot& root, const std::string& file,
                                        const std::string& key) {
    auto text = root.read(file);
    if (!text) return std::nullopt;
    const auto kv = parse_key_values(*text.value, ' ');
    const auto it = kv.find(key);
    return it == kv.end() ? std::nullopt : parse_u64(it->second);
}
}  // namespace

LimitRead read_limit(const Sysroot& root, const std::string& file) {
    if (!root.exists(file)) return {};
    auto line = root.read_line(file);
    if (!line) return {true, std::nullopt, line.detail};
    if (*line.value == "max") return {true, std::nullopt, {}};
    auto v = parse_u64(*line.value);
    if (!v) return {true, std::nullopt, file + ": not a number or \"max\": \"" + *line.value + "\""};
    if (*v >= kNoLimit) return {true, std::nullopt, {}};
    return {true, v, {}};
}

std::optional<CgroupLocation> locate_memory_cgroup(const Sysroot& root) {
    auto self = root.read("/proc/self/cgroup");
    if (!self) return std::nullopt;
    std::string v2_path, v1_path;
    std::istringstream in(*self.value);
    std::string line;
    while (std::getline(in, line)) {
        if (line.starts_with("0::")) v2_path = line.substr(3);
        const auto mem = line.find(":memory:");
        if (mem != std::string::npos) v1_path = line.substr(mem + 8);
    }
    if (!v2_path.empty() && v2_path.front() == '/') {
        const std::string leaf = v2_path == "/" ? "/sys/fs/cgroup" : "/sys/fs/cgroup" + v2_path;
        if (root.exists(leaf + "/memory.max") || root.exists(leaf + "/memory.current"))
            return CgroupLocation{2, leaf, v2_path};
    }
    // v1: the controller's hierarchy, or its root when the container has its own cgroup namespace.
    if (!v1_path.empty())
        for (const std::string& dir : {"/sys/fs/cgroup/memory" + (v1_path == "/" ? "" : v1_path),
                                       std::string("/sys/fs/cgroup/memory")})
            if (root.exists(dir + "/memory.limit_in_bytes")) return CgroupLocation{1, dir, v1_path};
    return std::nullopt;
}

std::optional<std::uint64_t> parse_oom_kill_count(std::string_view text) {
    const auto kv = parse_key_values(text, ' ');
    const auto it = kv.find("oom_kill");
    if (it == kv.end()) return std::nullopt;
    return parse_u64(trim(it->second));
}

std::optional<MemoryCgroup> read_memory_cgroup(const Sysroot& root) {
    auto at = locate_memory_cgroup(root);
    if (!at) return std::nullopt;
    MemoryCgroup c;
    c.at = *at;
    if (at->version == 2) {
        // The tightest memory.max from the leaf up to the root of the visible tree.
        const std::string base = "/sys/fs/cgroup";
        for (std::string dir = at->dir;; dir = dir.substr(0, dir.rfind('/'))) {
            if (auto l = read_limit(root, dir + "/memory.max").limit; l && (!c.limit || *l < *c.limit)) {
                c.limit = l;
                c.limit_file = dir + "/memory.max";
            }
            if (dir.size() <= base.size()) break;
        }
        if (auto cur = root.read_u64(at->dir + "/memory.current")) c.current = *cur.value;
        c.inactive_file = stat_value(root, at->dir + "/memory.stat", "inactive_file");
        c.oom_kills_file = at->dir + "/memory.events";
    } else {
        c.limit = read_limit(root, at->dir + "/memory.limit_in_bytes").limit;
        if (c.limit) c.limit_file = at->dir + "/memory.limit_in_bytes";
        if (auto cur = root.read_u64(at->dir + "/memory.usage_in_bytes")) c.current = *cur.value;
        c.inactive_file = stat_value(root, at->dir + "/memory.stat", "total_inactive_file");
        c.oom_kills_file = at->dir + "/memory.oom_control";
    }
    if (auto text = root.read(c.oom_kills_file)) c.oom_kills = parse_oom_kill_count(*text.value);
    return c;
}

}  // namespace loch::devices
