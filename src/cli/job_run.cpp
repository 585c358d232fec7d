#include "cli/job_run.hpp"

#include <fcntl.h>
#include <poll.h>
#include <pwd.h>
#include <signal.h>
#include <spawn.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <termios.h>
#include <unistd.h>

#include <array>
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <map>
#include <optional>
#include <thread>

#include <fmt/format.h>

#include "core/memory.hpp"

extern char** environ;

namespace loch::cli {

namespace {

using Clock = std::chrono::steady_clock;
using namespace std::chrono_literals;

constexpr int kExitNotFound = 127, kExitRefused = 1, kExitGaveUp = 75;
// A cancelled job's time between SIGTERM and SIGKILL (systemd's default stop timeout is 90 s; a job that
// saves a checkpoint on SIGTERM gets a shorter but real chance).
constexpr std::chrono::seconds kCancelGrace{30};
constexpr std::array kForwarded = {SIGINT, SIGTERM, SIGHUP, SIGQUIT, SIGUSR1, SIGUSR2};

// The signal handler only writes the signal's number (and whether a process sent it) to a pipe: the loop
// reads it and decides. A terminal's Ctrl-C already reached every process of the foreground group.
int g_signal_pipe = -1;  // NOLINT: a signal handler can reach nothing else
void on_signal(int sig, siginfo_t* info, void*) {
    const int saved = errno;
    const unsigned char msg[2] = {static_cast<unsigned char>(sig),
                                  static_cast<unsigned char>(info && info->si_code <= 0 ? 1 : 0)};
    [[maybe_unused]] const auto n = ::write(g_signal_pipe, msg, sizeof msg);
    errno = saved;
}

// Installs the handlers for the life of the run and puts the old ones back.
class SignalPipe {
  public:
    SignalPipe() {
        if (::pipe2(fds_.data(), O_CLOEXEC | O_NONBLOCK) != 0) throw std::runtime_error("pipe failed");
        g_signal_pipe = fds_[1];
        struct sigaction sa {};
        sa.sa_sigaction = on_signal;
        sa.sa_flags = SA_SIGINFO | SA_RESTART;
        sigemptyset(&sa.sa_mask);
        for (std::size_t i = 0; i < kForwarded.size(); ++i) ::sigaction(kForwarded[i], &sa, &old_[i]);
    }
    ~SignalPipe() {
        for (std::size_t i = 0; i < kForwarded.size(); ++i) ::sigaction(kForwarded[i], &old_[i], nullptr);
        g_signal_pipe = -1;
        ::close(fds_[0]);
        ::close(fds_[1]);
    }
    SignalPipe(const SignalPipe&) = delete;
    SignalPipe& operator=(const SignalPipe&) = delete;
    int read_end() const { return fds_[0]; }
    // Signals received since the last call: {signal, sent by a process (not the terminal)}.
    std::vector<std::pair<int, bool>> take() {
        std::vector<std::pair<int, bool>> out;
        unsigned char buf[64];
        for (ssize_t n; (n = ::read(fds_[0], buf, sizeof buf)) > 0;)
            for (ssize_t i = 0; i + 1 < n; i += 2) out.emplace_back(buf[i], buf[i + 1] != 0);
        return out;
    }

  private:
    std::array<int, 2> fds_{-1, -1};
    std::array<struct sigaction, kForwarded.size()> old_{};
};

// Sleeps up to `d` or until a signal arrives.
void wait_for(const SignalPipe& signals, Clock::duration d) {
    pollfd p{signals.read_end(), POLLIN, 0};
    ::poll(&p, 1, static_cast<int>(std::chrono::duration_cast<std::chrono::milliseconds>(d).count()));
}

std::string joined(const std::vector<std::string>& argv) {
    std::string out;
    for (const auto& a : argv) {
        const bool plain = !a.empty() && a.find_first_of(" \t\n\"'\\$`;&|<>()*?") == std::string::npos;
        std::string quoted = "'";
        for (char c : a) quoted += c == '\'' ? std::string("'\\''") : std::string(1, c);
        out += (out.empty() ? "" : " ") + (plain ? a : quoted + "'");
    }
    return out;
}

std::string user_name() {
    if (const passwd* pw = ::getpwuid(::getuid())) return pw->pw_name;
    return std::to_string(::getuid());
}

void say(const std::string& line) {
    std::fprintf(stderr, "loch run: %s\n", line.c_str());
}

// The environment of the command: loch's (the granted device's visibility variables) over ours.
std::vector<std::string> environment_with(const nlohmann::json& env) {
    std::map<std::string, std::string> vars;
    for (char** e = environ; e && *e; ++e) {
        const std::string kv = *e;
        const auto eq = kv.find('=');
        if (eq != std::string::npos) vars[kv.substr(0, eq)] = kv.substr(eq + 1);
    }
    if (env.is_object())
        for (const auto& [k, v] : env.items())
            if (v.is_string()) vars[k] = v.get<std::string>();
    std::vector<std::string> out;
    for (const auto& [k, v] : vars) out.push_back(k + "=" + v);
    return out;
}

int exit_code_of(int status) {
    if (WIFEXITED(status)) return WEXITSTATUS(status);
    if (WIFSIGNALED(status)) return 128 + WTERMSIG(status);
    return 1;
}

}  // namespace

std::optional<std::string> find_program(const std::string& name) {
    if (name.empty()) return std::nullopt;
    const auto runnable = [](const std::string& p) {
        struct stat st {};
        return ::stat(p.c_str(), &st) == 0 && S_ISREG(st.st_mode) && ::access(p.c_str(), X_OK) == 0;
    };
    if (name.find('/') != std::string::npos) return runnable(name) ? std::optional(name) : std::nullopt;
    const char* path = std::getenv("PATH");
    std::string_view rest = path && *path ? path : "/usr/local/bin:/usr/bin:/bin";
    while (true) {
        const auto colon = rest.find(':');
        const std::string dir(rest.substr(0, colon));
        const std::string candidate = (dir.empty() ? "." : dir) + "/" + name;
        if (runnable(candidate)) return candidate;
        if (colon == std::string_view::npos) return std::nullopt;
        rest.remove_prefix(colon + 1);
    }
}

int run_job(const ServerAddress& to, const RunOptions& o) {
    if (o.command.empty()) {
        say("no command: loch run [options] -- COMMAND ARGS…");
        return 2;
    }
    // A command that does not exist is an error before anything is asked of loch.
    const auto program = find_program(o.command.front());
    if (!program) {
        say(fmt::format("command not found: {} (no hold was asked for)", o.command.front()));
        return kExitNotFound;
    }
    const std::string name =
        o.name.empty() ? std::filesystem::path(o.command.front()).filename().string() : o.name;
    nlohmann::json ask = {{"name", name},           {"device", o.device},           {"priority", o.priority},
                          {"ttl_s", o.ttl.count()}, {"command", joined(o.command)}, {"owner", user_name()}};
    if (!o.memory.empty()) ask["memory"] = o.memory;
    if (!o.like.empty()) ask["like"] = o.like;

    SignalPipe signals;
    auto reply = exchange_loch(to, "POST", "/loch/holds", ask.dump());
    if (reply.status == 0 || reply.status >= 400 || !reply.json.is_object()) {
        say(reply.message());
        return kExitRefused;
    }
    nlohmann::json hold = reply.json;
    const std::string id = hold.value("id", "");
    std::string target = "/loch/holds/" + id;
    const auto release = [&] { exchange_loch(to, "DELETE", target, "", 5s); };

    // Waiting in loch's queue: poll (each poll is the heartbeat), print what changes.
    const auto since = Clock::now();
    std::string last_line;
    while (hold.value("state", "") == "waiting") {
        const std::string line =
            fmt::format("waiting for {} ({}; position {} in the {} queue): {}; ETA {}",
                        human_bytes(hold.value("bytes", std::uint64_t{0})), id, hold.value("position", 0),
                        hold.value("priority", ""), hold.value("reason", ""),
                        hold["eta_s"].is_number() ? fmt::format("{:.0f} s", hold["eta_s"].get<double>())
                                                  : hold.value("eta", std::string("unknown")));
        if (line != last_line) say(line), last_line = line;
        if (o.wait && Clock::now() - since > *o.wait) {
            release();
            say(fmt::format("gave up after waiting {} s (--wait); nothing was run", o.wait->count()));
            return kExitGaveUp;
        }
        wait_for(signals, 1s);
        for (auto [sig, from_process] : signals.take()) {
            (void)from_process;
            release();
            say(fmt::format("interrupted by signal {} while waiting; the hold is withdrawn", sig));
            return 128 + sig;
        }
        reply = exchange_loch(to, "GET", target, "");
        if (reply.status == 0 || reply.status >= 400 || !reply.json.is_object()) {
            say(reply.message());
            return kExitRefused;
        }
        hold = reply.json;
    }
    if (hold.value("cancelled", false)) {
        say(fmt::format("{} was cancelled (loch cancel) while it waited; nothing was run", id));
        return kExitRefused;
    }
    if (hold.value("state", "") != "granted") {
        const auto& err = hold["error"];
        say(err.is_object() ? err.value("message", hold.dump()) : hold.value("reason", hold.dump()));
        return kExitRefused;
    }
    const std::string device = hold.value("device", "");
    std::uint64_t booked = hold.value("bytes", std::uint64_t{0});
    say(fmt::format("granted {} on {} ({}); running: {}", human_bytes(booked), device, id,
                    joined(o.command)));

    // Start the command: in our group when we lead one (a shell job), else in its own.
    const bool lead_own_group = ::getpgrp() == ::getpid();
    const auto env = environment_with(hold["env"]);
    std::vector<char*> envp, argv;
    for (const auto& e : env) envp.push_back(const_cast<char*>(e.c_str()));
    envp.push_back(nullptr);
    for (const auto& a : o.command) argv.push_back(const_cast<char*>(a.c_str()));
    argv.push_back(nullptr);
    posix_spawnattr_t attr;
    posix_spawnattr_init(&attr);
    sigset_t none, defaults;
    sigemptyset(&none);
    sigemptyset(&defaults);
    for (int s : kForwarded) sigaddset(&defaults, s);
    posix_spawnattr_setsigmask(&attr, &none);
    posix_spawnattr_setsigdefault(&attr, &defaults);
    short flags = POSIX_SPAWN_SETSIGMASK | POSIX_SPAWN_SETSIGDEF;
    if (!lead_own_group) {
        flags |= POSIX_SPAWN_SETPGROUP;
        posix_spawnattr_setpgroup(&attr, 0);
    }
    posix_spawnattr_setflags(&attr, flags);
    pid_t child = 0;
    const int err = ::posix_spawn(&child, program->c_str(), nullptr, &attr, argv.data(), envp.data());
    posix_spawnattr_destroy(&attr);
    if (err != 0) {
        release();
        say(fmt::format("cannot run {}: {}; the hold is released", *program, std::strerror(err)));
        return err == ENOENT ? kExitNotFound : 126;
    }
    const pid_t pgid = lead_own_group ? ::getpgrp() : child;
    // On a terminal, a job in a group of its own needs the foreground to read from it.
    pid_t old_foreground = -1;
    if (!lead_own_group && ::isatty(STDIN_FILENO) && ::tcgetpgrp(STDIN_FILENO) == ::getpgrp()) {
        signal(SIGTTOU, SIG_IGN);
        if (::tcsetpgrp(STDIN_FILENO, pgid) == 0) old_foreground = ::getpgrp();
    }
    exchange_loch(to, "POST", target, nlohmann::json{{"pgid", pgid}}.dump(), 5s);

    // Running: heartbeat, forward signals sent to us, wait for the command.
    // The heartbeat is also how a cancel is heard: at least every 2 s.
    const auto beat = std::min<Clock::duration>(o.ttl / 3, 2s);
    auto next_beat = Clock::now() + beat;
    bool unreachable_said = false;
    int status = 0;
    // `loch cancel` of this job: SIGTERM now, SIGKILL if it is still there after the grace.
    std::optional<Clock::time_point> kill_at;
    const auto signal_job = [&](int sig) { lead_own_group ? ::kill(child, sig) : ::kill(-pgid, sig); };
    while (true) {
        const pid_t done = ::waitpid(child, &status, WNOHANG);
        if (done == child) break;
        if (kill_at && Clock::now() >= *kill_at) {
            say(fmt::format("{} still runs {} s after SIGTERM; sending SIGKILL", o.command.front(),
                            kCancelGrace.count()));
            signal_job(SIGKILL);
            kill_at.reset();
        }
        // Sent by a process (kill, systemd): on to the job. In our own group, to the command alone (the group
        // would send it back to us); from the terminal it reached the whole group already.
        for (auto [sig, from_process] : signals.take()) {
            if (!lead_own_group)
                ::kill(-pgid, sig);
            else if (from_process)
                ::kill(child, sig);
        }
        if (Clock::now() >= next_beat) {
            next_beat = Clock::now() + beat;
            reply = exchange_loch(to, "POST", target, nlohmann::json{{"pgid", pgid}}.dump(), 5s);
            if (reply.status == 0 && !unreachable_said) {
                say(reply.message() + "; the job keeps running");
                unreachable_said = true;
            } else if (reply.status == 200 && reply.json.is_object() &&
                       reply.json.value("cancelled", false)) {
                if (!kill_at) {
                    say(fmt::format("{} was cancelled (loch cancel): sending SIGTERM to {}", id,
                                    o.command.front()));
                    signal_job(SIGTERM);
                    kill_at = Clock::now() + kCancelGrace;
                }
            } else if (reply.status == 404 || (reply.status == 200 && reply.json.is_object() &&
                                               reply.json.value("state", "") != "granted")) {
                // loch restarted (or dropped the hold): re-register the running job where it runs.
                nlohmann::json again = ask;
                again.erase("like");
                again["memory"] = booked;
                again["device"] = device;
                again["running"] = true;
                again["pgid"] = pgid;
                const auto r = exchange_loch(to, "POST", "/loch/holds", again.dump(), 5s);
                if (r.status < 300 && r.json.is_object()) {
                    say(fmt::format("loch lost the hold {}; re-registered the running job as {}", target,
                                    r.json.value("id", "")));
                    hold = r.json;
                    target = "/loch/holds/" + hold.value("id", "");
                }
            } else if (reply.status > 0) {
                unreachable_said = false;
                if (reply.json.is_object()) booked = std::max(booked, reply.json.value("bytes", booked));
            }
        }
        wait_for(signals, 200ms);
    }
    if (old_foreground > 0) ::tcsetpgrp(STDIN_FILENO, old_foreground);
    exchange_loch(to, "DELETE", target, "", 5s);
    const int code = exit_code_of(status);
    if (WIFSIGNALED(status)) say(fmt::format("{} ended by signal {}", o.command.front(), WTERMSIG(status)));
    return code;
}

}  // namespace loch::cli
