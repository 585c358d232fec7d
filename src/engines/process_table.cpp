// engines/process_table — what an engine process meets outside itself: a free port and a token to start
// with, the variables of loch's environment it inherits, the processes an engine left behind (found by
// their tag, killed), a process's start time and argv from /proc (process.hpp declares them).
#include <netinet/in.h>
#include <signal.h>
#include <sys/socket.h>
#include <unistd.h>

#include <fstream>
#include <random>
#include <sstream>

#include <fmt/format.h>

#include "engines/fd.hpp"
#include "engines/process.hpp"

extern char** environ;

namespace loch::engines {

std::uint16_t find_free_port() {
    Fd s(::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0));
    if (s.get() < 0) throw std::runtime_error("socket: " + errno_text(errno));
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    a.sin_port = 0;
    if (::bind(s.get(), reinterpret_cast<sockaddr*>(&a), sizeof a) != 0)
        throw std::runtime_error("bind 127.0.0.1:0: " + errno_text(errno));
    socklen_t len = sizeof a;
    if (::getsockname(s.get(), reinterpret_cast<sockaddr*>(&a), &len) != 0)
        throw std::runtime_error("getsockname: " + errno_text(errno));
    return ntohs(a.sin_port);
}

std::string random_token() {
    std::random_device rd;
    std::string out;
    for (int i = 0; i < 4; ++i) out += fmt::format("{:08x}", rd());
    return out;
}

std::optional<std::string> inherited_env_value(std::string_view name) {
    if (!inherited_env_allowed(name)) return std::nullopt;
    for (char** e = environ; e != nullptr && *e != nullptr; ++e) {
        const std::string_view kv(*e);
        if (kv.size() > name.size() && kv.substr(0, name.size()) == name && kv[name.size()] == '=')
            return std::string(kv.substr(name.size() + 1));
    }
    return std::nullopt;
}

bool inherited_env_allowed(std::string_view name) {
    // Exact names: what any program needs to find things and speak the user's locale.
    static constexpr std::string_view kNames[] = {"PATH",     "HOME", "USER",   "LOGNAME", "LANG",
                                                  "LANGUAGE", "TZ",   "TMPDIR", "TERM",    "LD_LIBRARY_PATH"};
    // Prefixes: locale categories, GPU runtimes and their device selection, thread and math libraries.
    static constexpr std::string_view kPrefixes[] = {
        "LC_",   "CUDA_", "NVIDIA_", "HIP_",  "ROCR_", "ROCM_", "HSA_", "AMD_",      "GPU_", "VK_",  "MESA_",
        "RADV_", "ZE_",   "ONEAPI_", "SYCL_", "GGML_", "OMP_",  "KMP_", "OPENBLAS_", "MKL_", "BLIS_"};
    for (auto n : kNames)
        if (name == n) return true;
    for (auto p : kPrefixes)
        if (name.starts_with(p)) return true;
    return false;
}

std::vector<pid_t> kill_tagged(const std::string& tag, const std::filesystem::path& proc_root,
                               std::uint64_t started_since_ticks) {
    std::vector<pid_t> killed;
    if (tag.empty()) return killed;
    const std::string needle = std::string(kTagVariable) + "=" + tag;
    const pid_t self = ::getpid();
    std::error_code ec;
    for (const auto& entry : std::filesystem::directory_iterator(proc_root, ec)) {
        const auto name = entry.path().filename().string();
        if (name.empty() || name.find_first_not_of("0123456789") != std::string::npos) continue;
        const pid_t pid = static_cast<pid_t>(std::stol(name));
        if (pid == self) continue;
        if (started_since_ticks != 0 && proc_start_ticks(pid, proc_root).value_or(0) < started_since_ticks)
            continue;
        std::ifstream in(entry.path() / "environ", std::ios::binary);
        if (!in) continue;
        const std::string env((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
        for (std::size_t start = 0; start < env.size();) {
            const auto end = env.find('\0', start);
            const std::string_view var(env.data() + start,
                                       (end == std::string::npos ? env.size() : end) - start);
            if (var == needle) {
                if (::kill(pid, SIGKILL) == 0) killed.push_back(pid);
                break;
            }
            if (end == std::string::npos) break;
            start = end + 1;
        }
    }
    return killed;
}

std::optional<std::uint64_t> proc_start_ticks(pid_t pid, const std::filesystem::path& proc_root) {
    std::ifstream in(proc_root / std::to_string(pid) / "stat");
    if (!in) return std::nullopt;
    std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    // "pid (comm) state ppid …": comm may contain spaces and ')' — fields restart after the last ')'.
    const auto close = text.rfind(')');
    if (close == std::string::npos) return std::nullopt;
    std::istringstream rest(text.substr(close + 1));
    std::string field;
    // Field 3 (state) is the first after ')'; start time is field 22.
    for (int i = 3; i <= 22; ++i) {
        if (!(rest >> field)) return std::nullopt;
    }
    try {
        return std::stoull(field);
    } catch (const std::exception&) {
        return std::nullopt;
    }
}

std::optional<char> proc_state(pid_t pid, const std::filesystem::path& proc_root) {
    std::ifstream in(proc_root / std::to_string(pid) / "stat");
    std::string text;
    if (!std::getline(in, text)) return std::nullopt;
    const auto close = text.rfind(')');  // the state follows the last ')' (comm may hold one) and a space
    if (close == std::string::npos || close + 2 >= text.size()) return std::nullopt;
    return text[close + 2];
}

std::optional<std::vector<std::string>> proc_cmdline(pid_t pid, const std::filesystem::path& proc_root) {
    std::ifstream in(proc_root / std::to_string(pid) / "cmdline", std::ios::binary);
    if (!in) return std::nullopt;
    std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    std::vector<std::string> out;
    std::size_t start = 0;
    while (start < text.size()) {
        const auto end = text.find('\0', start);
        out.push_back(text.substr(start, end == std::string::npos ? std::string::npos : end - start));
        if (end == std::string::npos) break;
        start = end + 1;
    }
    return out;
}

}  // namespace loch::engines
