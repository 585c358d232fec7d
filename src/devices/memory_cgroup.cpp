#include "devices/memory_cgroup.hpp"

#include <sstream>

namespace loch::devices {

namespace {

constexpr std::uint64_t kNoLimit = 1ull << 60;  // v1 reports "no limit" as a huge page-rounded number

// memory.max / memory.limit_in_bytes: a number, or "max" for no limit.
struct LimitRead {
    bool present = false;                // the file exists
    std::optional<std::uint64_t> limit;  // nullopt with present = no limit (or `error`)
    std::string error;                   // unreadable or malformed: why
};

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

// "key N" lines (memory.stat, memory.events, memory.oom_control): N for `key`.
std::optional<std::uint64_t> key_value(std::string_view text, const std::string& key) {
    const auto kv = parse_key_values(text, ' ');
    const auto it = kv.find(key);
    return it == kv.end() ? std::nullopt : parse_u64(it->second);
}

std::optional<std::uint64_t> stat_value(const Sysroot& root, const std::string& file,
                                        const std::string& key) {
    auto text = root.read(file);
    return text ? key_value(*text.value, key) : std::nullopt;
}

}  // namespace

EffectiveLimit effective_limit(const Sysroot& root, const CgroupLocation& at) {
    EffectiveLimit e;
    const auto consider = [&](const std::string& file) {
        const auto r = read_limit(root, file);
        if (!r.error.empty() && e.error.empty()) e.error = r.error;
        if (r.limit && (!e.limit || *r.limit < *e.limit)) e.limit = r.limit, e.file = file;
    };
    if (at.version == 1) {
        consider(at.dir + "/memory.limit_in_bytes");
        return e;
    }
    const std::string base = "/sys/fs/cgroup";
    for (std::string dir = at.dir;; dir = dir.substr(0, dir.rfind('/'))) {
        consider(dir + "/memory.max");
        if (dir.size() <= base.size()) break;
    }
    return e;
}

std::string usage_file(const CgroupLocation& at) {
    return at.dir + (at.version == 2 ? "/memory.current" : "/memory.usage_in_bytes");
}

CgroupPaths cgroup_paths(std::string_view proc_self_cgroup, std::string_view v1_controller) {
    CgroupPaths out;
    std::istringstream in{std::string(proc_self_cgroup)};
    std::string line;
    while (std::getline(in, line)) {
        if (line.starts_with("0::")) out.v2 = line.substr(3);
        const auto colon = line.find(':');
        const auto second = colon == std::string::npos ? colon : line.find(':', colon + 1);
        if (second == std::string::npos) continue;
        std::istringstream controllers(line.substr(colon + 1, second - colon - 1));
        for (std::string c; std::getline(controllers, c, ',');)
            if (c == v1_controller) out.v1 = line.substr(second + 1);
    }
    return out;
}

std::optional<CgroupLocation> locate_memory_cgroup(const Sysroot& root) {
    auto self = root.read("/proc/self/cgroup");
    if (!self) return std::nullopt;
    const auto [v2_path, v1_path] = cgroup_paths(*self.value, "memory");
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
    return key_value(text, "oom_kill");
}

std::optional<MemoryCgroup> read_memory_cgroup(const Sysroot& root) {
    auto at = locate_memory_cgroup(root);
    if (!at) return std::nullopt;
    MemoryCgroup c;
    c.at = *at;
    auto limit = effective_limit(root, *at);
    c.limit = limit.limit;
    c.limit_file = std::move(limit.file);
    if (auto cur = root.read_u64(usage_file(*at))) c.current = *cur.value;
    const bool v2 = at->version == 2;
    c.inactive_file =
        stat_value(root, at->dir + "/memory.stat", v2 ? "inactive_file" : "total_inactive_file");
    c.oom_kills_file = at->dir + (v2 ? "/memory.events" : "/memory.oom_control");
    if (auto text = root.read(c.oom_kills_file)) c.oom_kills = parse_oom_kill_count(*text.value);
    return c;
}

}  // namespace loch::devices
