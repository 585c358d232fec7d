// devices/memory_cgroup — loch's memory cgroup as the kernel's OOM killer sees it: where it is, its limit,
// its use and how many of its processes the OOM killer has ended (cgroup v2 `memory.events` `oom_kill`,
// v1 `memory.oom_control` `oom_kill`). A container's limit kills an engine with a bare SIGKILL that looks
// like any other; this counter, read before and after, is what tells the two apart.
//
// Engines are loch's children and stay in its cgroup (a container, a systemd unit, a pod), so loch's own
// cgroup is the one whose counter moves. v2 counts hierarchically: the leaf's counter includes kills in
// cgroups below it, and the limit that bit may sit on an ancestor (the tightest `memory.max` up to the root).
#pragma once

#include <algorithm>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

#include "devices/sysroot.hpp"

namespace loch::devices {

// Where the process's memory cgroup lives in the tree ("/sys/fs/cgroup/…"), from /proc/self/cgroup.
struct CgroupLocation {
    int version = 2;   // 2 = unified hierarchy, 1 = the v1 memory controller (hybrid hosts)
    std::string dir;   // the cgroup's directory: memory.* files of this cgroup
    std::string path;  // the path /proc/self/cgroup names ("/system.slice/loch.service")
};
std::optional<CgroupLocation> locate_memory_cgroup(const Sysroot& root);

// What /proc/self/cgroup says: the unified hierarchy's path ("0::…") and the v1 path of `v1_controller`
// (a line may list several: "2:cpu,cpuacct:/…"); empty when absent. Pure. (devices/cpu_quota reads it too.)
struct CgroupPaths {
    std::string v2, v1;
};
CgroupPaths cgroup_paths(std::string_view proc_self_cgroup, std::string_view v1_controller);

struct MemoryCgroup {
    CgroupLocation at;
    std::optional<std::uint64_t> limit;    // the tightest limit in force; nullopt = none
    std::string limit_file;                // the file it was read from
    std::optional<std::uint64_t> current;  // memory.current / memory.usage_in_bytes
    // Page cache the kernel drops first (memory.stat inactive_file, v1 total_inactive_file): current less
    // this is the working set, what the limit really presses on (kubelet's measure too).
    std::optional<std::uint64_t> inactive_file;
    std::optional<std::uint64_t> oom_kills;  // nullopt: the kernel does not count them (v1 before 4.13)
    std::string oom_kills_file;
    std::optional<std::uint64_t> working_set() const {
        if (!current) return std::nullopt;
        return *current - std::min(*current, inactive_file.value_or(0));
    }
};
// nullopt when the process is in no cgroup with a memory controller (or /proc is not mounted).
std::optional<MemoryCgroup> read_memory_cgroup(const Sysroot& root);

// The limit in force for the cgroup at `at`: v2 the tightest memory.max from its directory up to the root,
// v1 its memory.limit_in_bytes ("max", or v1's huge page-rounded number, is no limit). `file` is where the
// limit was read; `error` the first unreadable or malformed file met (the limit may still be known).
struct EffectiveLimit {
    std::optional<std::uint64_t> limit;
    std::string file;
    std::string error;
};
EffectiveLimit effective_limit(const Sysroot& root, const CgroupLocation& at);
// The file its use is read from: memory.current (v2), memory.usage_in_bytes (v1).
std::string usage_file(const CgroupLocation& at);

// "oom_kill N" out of memory.events / memory.oom_control text.
std::optional<std::uint64_t> parse_oom_kill_count(std::string_view text);

}  // namespace loch::devices
