#include "devices/processes.hpp"

#include <unistd.h>

#include <algorithm>
#include <fstream>
#include <iterator>
#include <set>
#include <sstream>

namespace loch::devices {

namespace {

constexpr std::size_t kCommandChars = 160;

bool is_pid(const std::string& name) {
    return !name.empty() &&
           std::all_of(name.begin(), name.end(), [](char c) { return c >= '0' && c <= '9'; });
}

// "pid (comm) state ppid pgrp …": comm may hold spaces and parentheses; the fields follow the last ')'.
std::optional<int> group_of(const std::filesystem::path& pid_dir) {
    std::ifstream in(pid_dir / "stat");
    std::string stat;
    if (!std::getline(in, stat)) return std::nullopt;
    const auto close = stat.rfind(')');
    if (close == std::string::npos) return std::nullopt;
    std::istringstream rest(stat.substr(close + 1));
    std::string state;
    int ppid = 0, pgrp = 0;
    if (!(rest >> state >> ppid >> pgrp)) return std::nullopt;
    return pgrp;
}

std::string user_of(unsigned uid, const std::filesystem::path& passwd) {
    std::ifstream in(passwd);
    std::string line;
    while (std::getline(in, line)) {
        // name:password:uid:…
        const auto a = line.find(':');
        const auto b = a == std::string::npos ? a : line.find(':', a + 1);
        const auto c = b == std::string::npos ? b : line.find(':', b + 1);
        if (c == std::string::npos) continue;
        if (line.substr(b + 1, c - b - 1) == std::to_string(uid)) return line.substr(0, a);
    }
    return std::to_string(uid);
}

}  // namespace

std::optional<ProcessInfo> describe_process(int pid, const std::filesystem::path& proc,
                                            const std::filesystem::path& passwd) {
    const auto dir = proc / std::to_string(pid);
    std::ifstream status(dir / "status");
    if (!status) return std::nullopt;
    ProcessInfo p;
    p.pid = pid;
    std::string line, name;
    std::optional<unsigned> uid;
    while (std::getline(status, line)) {
        if (line.starts_with("Name:")) {
            name = line.substr(5);
            name.erase(0, name.find_first_not_of(" \t"));
        } else if (line.starts_with("Uid:")) {
            std::istringstream ss(line.substr(4));
            unsigned real = 0;
            if (ss >> real) uid = real;
        }
    }
    p.user = uid ? user_of(*uid, passwd) : "?";
    std::ifstream cmd(dir / "cmdline", std::ios::binary);
    std::string raw((std::istreambuf_iterator<char>(cmd)), std::istreambuf_iterator<char>());
    while (!raw.empty() && raw.back() == '\0') raw.pop_back();
    std::replace(raw.begin(), raw.end(), '\0', ' ');
    // Kernel threads and zombies have no command line: their name, as ps shows it.
    p.command = raw.empty() ? "[" + name + "]" : raw;
    if (p.command.size() > kCommandChars) p.command = p.command.substr(0, kCommandChars - 3) + "...";
    return p;
}

std::vector<std::pair<int, std::uint64_t>> largest_resident(std::size_t n,
                                                            const std::filesystem::path& proc) {
    static const std::uint64_t page = static_cast<std::uint64_t>(::sysconf(_SC_PAGESIZE));
    std::vector<std::pair<int, std::uint64_t>> all;
    std::error_code ec;
    for (const auto& e : std::filesystem::directory_iterator(proc, ec)) {
        const std::string name = e.path().filename().string();
        if (!is_pid(name)) continue;
        std::ifstream statm(e.path() / "statm");
        std::uint64_t size = 0, resident = 0;
        if (statm >> size >> resident && resident > 0) all.emplace_back(std::stoi(name), resident * page);
    }
    const auto k = std::min(n, all.size());
    std::partial_sort(all.begin(), all.begin() + static_cast<std::ptrdiff_t>(k), all.end(),
                      [](const auto& a, const auto& b) { return a.second > b.second; });
    all.resize(k);
    return all;
}

std::optional<std::vector<int>> group_by_descent(int pgid, const std::vector<int>& known,
                                                 const std::filesystem::path& proc) {
    std::vector<int> todo{pgid};
    todo.insert(todo.end(), known.begin(), known.end());
    std::set<int> seen;
    std::vector<int> out;
    bool children_files = false;
    while (!todo.empty()) {
        const int pid = todo.back();
        todo.pop_back();
        if (!seen.insert(pid).second) continue;
        const auto dir = proc / std::to_string(pid);
        const auto group = group_of(dir);
        if (!group) continue;  // gone
        if (*group == pgid) out.push_back(pid);
        // Children of every thread: a worker may be forked by any of them. (Descendants outside the group
        // are walked too: a grandchild can be back in it only by setpgid, which is rare but cheap to see.)
        std::error_code ec;
        for (const auto& task : std::filesystem::directory_iterator(dir / "task", ec)) {
            std::ifstream children(task.path() / "children");
            if (!children) continue;
            children_files = true;
            int child = 0;
            while (children >> child) todo.push_back(child);
        }
    }
    if (!children_files && !out.empty()) return std::nullopt;  // no children files here: scan instead
    std::sort(out.begin(), out.end());
    if (out.empty()) out.push_back(pgid);
    return out;
}

std::vector<int> group_by_scan(int pgid, const std::filesystem::path& proc) {
    std::vector<int> out;
    std::error_code ec;
    for (const auto& e : std::filesystem::directory_iterator(proc, ec)) {
        const std::string name = e.path().filename().string();
        if (!is_pid(name)) continue;
        if (group_of(e.path()) == pgid) out.push_back(std::stoi(name));
    }
    std::sort(out.begin(), out.end());
    if (out.empty()) out.push_back(pgid);
    return out;
}

}  // namespace loch::devices
