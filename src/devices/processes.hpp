// devices/processes — who a process is, for naming the programs that hold memory loch did not book ("other
// programs hold 11.2 GiB: `python train.py` (pid 4123, alice) 11.2 GiB"): its command line and its owner,
// read from /proc and /etc/passwd. No NSS lookup (getpwuid may ask a directory server over the network, and
// this runs on loch's one thread); a user /etc/passwd does not list is shown as its uid.
#pragma once

#include <cstdint>
#include <filesystem>
#include <optional>
#include <string>
#include <utility>
#include <vector>

namespace loch::devices {

struct ProcessInfo {
    int pid = 0;
    std::string user;     // name, or the uid as text
    std::string command;  // the command line, arguments joined by spaces, at most 160 characters
};

// nullopt when the process is gone (or /proc hides it).
std::optional<ProcessInfo> describe_process(int pid, const std::filesystem::path& proc = "/proc",
                                            const std::filesystem::path& passwd = "/etc/passwd");

// The `n` processes with the largest resident memory (RSS, from /proc/PID/statm), largest first: {pid,
// bytes}.
std::vector<std::pair<int, std::uint64_t>> largest_resident(std::size_t n,
                                                            const std::filesystem::path& proc = "/proc");

// The processes of process group `pgid` found by descent, without reading every process: the leader and
// the `known` members (those still alive and still in the group), then their children and theirs, through
// each thread's /proc/PID/task/TID/children. Cost: a few reads per member, not one per process on the
// machine. It misses only a member whose parent left before it was seen (an orphan reparented elsewhere):
// callers rescan the whole of /proc now and then (group_by_scan). nullopt where the kernel has no children
// files (CONFIG_PROC_CHILDREN): scan instead.
std::optional<std::vector<int>> group_by_descent(int pgid, const std::vector<int>& known,
                                                 const std::filesystem::path& proc = "/proc");

// Every process whose /proc/PID/stat names group `pgid` (a read of every process on the machine). The
// leader alone when none does (it may have exited).
std::vector<int> group_by_scan(int pgid, const std::filesystem::path& proc = "/proc");

}  // namespace loch::devices
