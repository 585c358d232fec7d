// Exit classification: wait status + log lines → ExitReport (see exit.hpp for the order of rules).
#include "engines/exit.hpp"

#include <sys/wait.h>

#include <fmt/format.h>
#include <algorithm>
#include <array>
#include <cctype>
#include <csignal>
#include <nlohmann/json.hpp>

#include "core/memory.hpp"
#include "core/text.hpp"

namespace loch::engines {

std::string_view to_string(ExitKind k) {
    switch (k) {
        case ExitKind::exited:
            return "exited";
        case ExitKind::exit_code:
            return "exit_code";
        case ExitKind::signal:
            return "signal";
        case ExitKind::out_of_memory:
            return "out_of_memory";
        case ExitKind::port_in_use:
            return "port_in_use";
        case ExitKind::startup_timeout:
            return "startup_timeout";
        case ExitKind::hung:
            return "hung";
        case ExitKind::spawn_failed:
            return "spawn_failed";
        case ExitKind::stopped:
            return "stopped";
    }
    return "unknown";
}

std::string signal_name(int sig) {
    static constexpr std::array<std::pair<int, const char*>, 20> names{{
        {SIGHUP, "SIGHUP"},   {SIGINT, "SIGINT"},   {SIGQUIT, "SIGQUIT"}, {SIGILL, "SIGILL"},
        {SIGTRAP, "SIGTRAP"}, {SIGABRT, "SIGABRT"}, {SIGBUS, "SIGBUS"},   {SIGFPE, "SIGFPE"},
        {SIGKILL, "SIGKILL"}, {SIGUSR1, "SIGUSR1"}, {SIGSEGV, "SIGSEGV"}, {SIGUSR2, "SIGUSR2"},
        {SIGPIPE, "SIGPIPE"}, {SIGALRM, "SIGALRM"}, {SIGTERM, "SIGTERM"}, {SIGSTKFLT, "SIGSTKFLT"},
        {SIGXCPU, "SIGXCPU"}, {SIGXFSZ, "SIGXFSZ"}, {SIGSYS, "SIGSYS"},   {SIGSTOP, "SIGSTOP"},
    }};
    for (const auto& [n, name] : names) {
        if (n == sig) return name;
    }
    return "signal " + std::to_string(sig);
}

namespace {

bool contains(std::string_view hay, std::string_view needle) {
    return hay.find(needle) != std::string_view::npos;
}

// Allocation failures as this llama.cpp (CPU, CUDA, HIP, Vulkan backends) and the C++ runtime print them.
bool is_oom_line(std::string_view line) {
    const std::string l = core::ascii_lower(line);
    if (contains(l, "out of memory") || contains(l, "outofdevicememory") || contains(l, "outofhostmemory"))
        return true;
    if (contains(l, "failed to allocate") || contains(l, "unable to allocate")) return true;
    if (contains(l, "std::bad_alloc") || contains(l, "cannot allocate memory")) return true;
    if (contains(l, "not enough space in the buffer")) return true;
    if (contains(l, "hipmalloc") && (contains(l, "fail") || contains(l, "error"))) return true;
    if (contains(l, "cudamalloc") && (contains(l, "fail") || contains(l, "error"))) return true;
    // ggml_backend_*alloc* failed
    const auto g = l.find("ggml_backend_");
    if (g != std::string::npos) {
        const auto a = l.find("alloc", g);
        if (a != std::string::npos && l.find("fail", a) != std::string::npos) return true;
    }
    return false;
}

bool is_bind_line(std::string_view line) {
    const std::string l = core::ascii_lower(line);
    return contains(l, "couldn't bind") || contains(l, "address already in use");
}

// llama.cpp at -lv 4 prefixes lines with "<m>.<ss>.<mmm>.<uuu> <level> " (level I W E D T).
std::size_t llama_prefix_len(std::string_view l) {
    std::size_t i = 0;
    int dots = 0;
    while (i < l.size() && (std::isdigit(static_cast<unsigned char>(l[i])) || l[i] == '.'))
        dots += l[i++] == '.';
    if (dots != 3 || i + 2 >= l.size() || l[i] != ' ' ||
        !std::isupper(static_cast<unsigned char>(l[i + 1])) || l[i + 2] != ' ')
        return 0;
    return i + 3;
}

bool is_error_line(std::string_view line) {
    const auto p = llama_prefix_len(line);
    if (p > 0 && line[p - 2] == 'E') return true;
    const std::string l = core::ascii_lower(line);
    return contains(l, "error") || contains(l, "failed") || contains(l, "exception") ||
           contains(l, "abort") || contains(l, "does not support") || contains(l, "not supported") ||
           contains(l, "unsupported") || contains(l, "invalid");
}

// The line that best explains a nonzero exit: the first error of the last burst of errors (the root cause
// comes first: "failed to read header", then "failed to load model", then "exiting due to …").
// The first `matches` line of the newest burst: walking back from the newest matching line, the burst goes
// on while lines `continues` it with at most two other lines between them. Engines print the cause first
// ("allocating 163840.00 MiB … cudaMalloc failed") and its consequences after it.
template <typename Matches, typename Continues>
std::optional<std::string> first_of_last_burst(std::span<const std::string> lines, Matches matches,
                                               Continues continues) {
    std::ptrdiff_t newest = -1;
    for (std::ptrdiff_t i = static_cast<std::ptrdiff_t>(lines.size()) - 1; i >= 0; --i) {
        if (matches(lines[static_cast<std::size_t>(i)])) {
            newest = i;
            break;
        }
    }
    if (newest < 0) return std::nullopt;
    std::ptrdiff_t first = newest;
    int gap = 0;
    for (std::ptrdiff_t i = newest - 1; i >= 0 && gap <= 2; --i) {
        const auto& l = lines[static_cast<std::size_t>(i)];
        if (matches(l)) {
            first = i;
            gap = 0;
        } else if (continues(l)) {
            gap = 0;
        } else {
            ++gap;
        }
    }
    return lines[static_cast<std::size_t>(first)];
}

// What an engine prints after the cause, whatever the cause was ("failed to create context with model …",
// "failed to load model", "exiting due to model loading error"): never the line that explains.
bool is_consequence_line(std::string_view line) {
    const std::string l = core::ascii_lower(line);
    for (const char* c :
         {"failed to create context", "failed to load model", "exiting due to", "cleaning up before exit",
          "failed to initialize the context", "error: failed to load", "llama_model_load_from_file"})
        if (contains(l, c)) return true;
    return false;
}

// The line that explains an exit, found by content: the first error of the last burst of errors that is not a
// consequence; a burst made only of consequences falls back to an earlier error line, else its own first
// line.
std::optional<std::string> find_error_line(std::span<const std::string> lines) {
    const auto cause = [](std::string_view l) { return is_error_line(l) && !is_consequence_line(l); };
    if (auto c = first_of_last_burst(lines, cause, is_error_line)) return c;
    return first_of_last_burst(lines, is_error_line, is_error_line);
}

std::string trim_line(std::string s) {
    s.erase(0, llama_prefix_len(s));
    while (!s.empty() && std::isspace(static_cast<unsigned char>(s.back()))) s.pop_back();
    std::size_t b = 0;
    while (b < s.size() && std::isspace(static_cast<unsigned char>(s[b]))) ++b;
    s.erase(0, b);
    if (s.size() > 300) s = s.substr(0, 300) + "…";
    return s;
}

}  // namespace

std::optional<std::string> find_oom_line(std::span<const std::string> log_lines) {
    // The first allocation failure of the last burst: "allocating 163840.00 MiB on device 0: cudaMalloc
    // failed" (with the numbers) comes before "failed to allocate buffer for kv cache".
    return first_of_last_burst(log_lines, is_oom_line, is_error_line);
}

ExitReport classify_exit(const ExitFacts& facts, std::span<const std::string> log_lines,
                         std::size_t tail_lines) {
    ExitReport r;
    const std::size_t n = std::min(tail_lines, log_lines.size());
    r.log_tail.assign(log_lines.end() - static_cast<std::ptrdiff_t>(n), log_lines.end());

    const int st = facts.wait_status;
    std::string status_text;
    if (WIFEXITED(st)) {
        r.exit_code = WEXITSTATUS(st);
        status_text = "exit " + std::to_string(*r.exit_code);
    } else if (WIFSIGNALED(st)) {
        r.signal = WTERMSIG(st);
        r.signal_name = signal_name(*r.signal);
        // The shell's convention (128 + signal) so that "exit 139 / SIGSEGV" reads as people know it.
        status_text = "exit " + std::to_string(128 + *r.signal) + " / " + r.signal_name;
    } else {
        status_text = "wait status " + std::to_string(st);
    }

    if (!facts.hung.empty()) {
        r.kind = ExitKind::hung;
        r.summary = "hung: " + facts.hung + "; loch killed it (" + status_text + ")";
        return r;
    }
    if (facts.startup_timed_out) {
        r.kind = ExitKind::startup_timeout;
        r.summary = "not ready before the startup timeout; loch killed it (" + status_text + ")";
        return r;
    }
    if (facts.stop_requested) {
        r.kind = ExitKind::stopped;
        r.summary = "stopped by loch (" + status_text + ")";
        return r;
    }
    const bool clean = r.exit_code && *r.exit_code == 0;
    if (clean) {
        r.kind = ExitKind::exited;
        r.summary = "exited on its own with status 0";
        return r;
    }
    if (auto oom = find_oom_line(log_lines)) {
        r.kind = ExitKind::out_of_memory;
        r.matched_line = trim_line(*oom);
        r.summary = "out of memory: " + r.matched_line + " (" + status_text + ")";
        return r;
    }
    for (auto it = log_lines.rbegin(); it != log_lines.rend(); ++it) {
        if (is_bind_line(*it)) {
            r.kind = ExitKind::port_in_use;
            r.matched_line = trim_line(*it);
            r.summary = "could not bind its port: " + r.matched_line + " (" + status_text + ")";
            return r;
        }
    }
    if (r.signal) {
        if (*r.signal == SIGKILL) {
            r.kind = ExitKind::out_of_memory;
            r.summary = status_text +
                        ": killed from outside loch — likely the kernel OOM killer or a cgroup memory limit "
                        "(see `dmesg` / the cgroup's memory.events)";
            return r;
        }
        r.kind = ExitKind::signal;
        r.summary = status_text;
        if (auto e = find_error_line(log_lines)) {
            r.matched_line = trim_line(*e);
            r.summary += ": " + r.matched_line;
        }
        return r;
    }
    r.kind = ExitKind::exit_code;
    r.summary = status_text;
    if (auto e = find_error_line(log_lines)) {
        r.matched_line = trim_line(*e);
        r.summary += ": " + r.matched_line;
    }
    return r;
}

void to_json(nlohmann::json& j, const ExitReport& r) {
    j = nlohmann::json{{"kind", to_string(r.kind)},
                       {"exit_code", r.exit_code ? nlohmann::json(*r.exit_code) : nlohmann::json(nullptr)},
                       {"signal", r.signal ? nlohmann::json(*r.signal) : nlohmann::json(nullptr)},
                       {"signal_name", r.signal ? nlohmann::json(r.signal_name) : nlohmann::json(nullptr)},
                       {"summary", r.summary},
                       {"log_tail", r.log_tail}};
    if (!r.matched_line.empty()) j["matched_line"] = r.matched_line;
    if (r.kill) {
        const auto opt = [](const std::optional<std::uint64_t>& v) {
            return v ? nlohmann::json(*v) : nlohmann::json(nullptr);
        };
        j["oom_kill"] = {{"before", r.kill->oom_kills_before},     {"after", r.kill->oom_kills_after},
                         {"limit_bytes", opt(r.kill->limit)},      {"limit_file", r.kill->limit_file},
                         {"used_bytes", opt(r.kill->used)},        {"used_how", r.kill->used_how},
                         {"reserved_bytes", opt(r.kill->reserved)}};
    }
}

bool is_outside_sigkill(const ExitReport& r) {
    return r.kind == ExitKind::out_of_memory && r.signal == SIGKILL && r.matched_line.empty();
}

void name_kill(ExitReport& r, const KillEvidence& e) {
    if (!is_outside_sigkill(r)) return;
    r.kill = e;
    const auto counter = fmt::format("oom_kill {}→{}", e.oom_kills_before, e.oom_kills_after);
    const auto status = r.summary.substr(0, r.summary.find(':'));  // "exit 137 / SIGKILL"
    if (!e.counted()) {
        r.kind = ExitKind::signal;
        r.summary = fmt::format(
            "{}: killed by SIGKILL from outside loch — not the OOM killer (the memory cgroup's {} did not "
            "move): a person, a supervisor or a script sent it",
            status, counter);
        return;
    }
    std::string use;
    if (e.used)
        use = fmt::format("; it used about {}{}", human_bytes(*e.used),
                          e.reserved ? " against a " + human_bytes(*e.reserved) + " reservation" : "");
    if (e.limit)
        r.summary = fmt::format(
            "{}: killed by the container's memory limit {} ({}, {}){}. Raise the limit (podman/docker "
            "--memory, Kubernetes resources.limits.memory, systemd MemoryMax=) or give the model a smaller "
            "context",
            status, human_bytes(*e.limit), counter, e.limit_file, use);
    else
        r.summary = fmt::format(
            "{}: killed by the kernel's OOM killer: the machine ran out of memory ({}){}. Free memory or "
            "lower loch's CPU budget",
            status, counter, use);
}

}  // namespace loch::engines
