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

}  // namespace loch::devices
