#include "plan/dry_run.hpp"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <array>
#include <cctype>
#include <cerrno>
#include <charconv>
#include <cstring>
#include <stdexcept>

#include <fmt/format.h>

#include "plan/engine_log.hpp"

extern char** environ;

namespace loch::plan {

std::string find_fit_params(const std::filesystem::path& near) {
    std::error_code ec;
    const auto next = near / kFitParamsProgram;
    if (!near.empty() && std::filesystem::exists(next, ec)) return next.string();
    return std::string(kFitParamsProgram);  // looked up in PATH
}

namespace {

std::vector<std::string_view> words(std::string_view line) {
    std::vector<std::string_view> out;
    std::size_t i = 0;
    while (i < line.size()) {
        while (i < line.size() && std::isspace(static_cast<unsigned char>(line[i]))) ++i;
        std::size_t j = i;
        while (j < line.size() && !std::isspace(static_cast<unsigned char>(line[j]))) ++j;
        if (j > i) out.push_back(line.substr(i, j - i));
        i = j;
    }
    return out;
}

std::optional<std::uint64_t> mib(std::string_view w) {
    std::uint64_t v = 0;
    auto [p, ec] = std::from_chars(w.data(), w.data() + w.size(), v);
    if (ec != std::errc{} || p != w.data() + w.size() || v > (1ull << 40)) return std::nullopt;
    return v * kMiB;
}

// RAII pipe ends.
struct Fd {
    int fd = -1;
    Fd() = default;
    explicit Fd(int f) : fd(f) {}
    Fd(const Fd&) = delete;
    Fd& operator=(const Fd&) = delete;
    ~Fd() { reset(); }
    void reset() {
        if (fd >= 0) ::close(fd);
        fd = -1;
    }
};

struct Pipe {
    Fd r, w;
    Pipe() {
        int p[2];
        if (::pipe2(p, O_CLOEXEC) != 0)
            throw std::runtime_error(fmt::format("pipe failed: {}", std::strerror(errno)));
        r.fd = p[0];
        w.fd = p[1];
    }
};

}  // namespace

const DryRunDevice* DryRunResult::find(std::string_view device) const {
    for (const auto& d : devices)
        if (d.device == device) return &d;
    return nullptr;
}

DryRunResult parse_fit_print(std::string_view text) {
    DryRunResult r;
    std::string_view all = text;
    while (!text.empty()) {
        auto nl = text.find('\n');
        auto w = words(text.substr(0, nl));
        text = nl == std::string_view::npos ? std::string_view{} : text.substr(nl + 1);
        if (w.size() != 4 || w[0].size() > 64 || w[0].front() == '-') continue;
        auto m = mib(w[1]), c = mib(w[2]), k = mib(w[3]);
        if (!m || !c || !k) continue;
        DryRunDevice d;
        d.name = std::string(w[0]);
        d.device = device_of_buffer(w[0]);
        std::string detail = "llama-fit-params --fit-print: " + d.name;
        d.model = {*m, Source::engine_dry_run, detail + " model"};
        d.context = {*c, Source::engine_dry_run, detail + " context (KV)"};
        d.compute = {*k, Source::engine_dry_run, detail + " compute"};
        r.devices.push_back(std::move(d));
    }
    if (r.devices.empty())
        throw std::runtime_error(
            fmt::format("llama-fit-params printed no '<device> <model> <context> <compute>' line "
                        "(stdout was {} bytes, starting: '{}')",
                        all.size(), all.substr(0, 200)));
    return r;
}

ProcessResult run_capture(const std::vector<std::string>& argv, std::chrono::milliseconds timeout) {
    if (argv.empty()) throw std::invalid_argument("run_capture: empty argv");
    Pipe out, err;
    posix_spawn_file_actions_t fa;
    posix_spawn_file_actions_init(&fa);
    posix_spawn_file_actions_addopen(&fa, 0, "/dev/null", O_RDONLY, 0);
    posix_spawn_file_actions_adddup2(&fa, out.w.fd, 1);
    posix_spawn_file_actions_adddup2(&fa, err.w.fd, 2);
    std::vector<char*> args;
    for (const auto& a : argv) args.push_back(const_cast<char*>(a.c_str()));
    args.push_back(nullptr);
    pid_t pid = -1;
    int rc = argv[0].find('/') == std::string::npos
                 ? posix_spawnp(&pid, argv[0].c_str(), &fa, nullptr, args.data(), environ)
                 : posix_spawn(&pid, argv[0].c_str(), &fa, nullptr, args.data(), environ);
    posix_spawn_file_actions_destroy(&fa);
    if (rc != 0) throw std::runtime_error(fmt::format("cannot start '{}': {}", argv[0], std::strerror(rc)));
    out.w.reset();
    err.w.reset();

    ProcessResult res;
    auto deadline = std::chrono::steady_clock::now() + timeout;
    std::array<char, 65536> buf{};
    bool out_open = true, err_open = true;
    while (out_open || err_open) {
        auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline -
                                                                          std::chrono::steady_clock::now());
        if (left.count() <= 0) {
            res.timed_out = true;
            ::kill(pid, SIGKILL);
            break;
        }
        pollfd fds[2] = {{out_open ? out.r.fd : -1, POLLIN, 0}, {err_open ? err.r.fd : -1, POLLIN, 0}};
        int n = ::poll(fds, 2, static_cast<int>(std::min<long long>(left.count(), 1000)));
        if (n < 0 && errno != EINTR) break;
        for (int i = 0; i < 2; ++i) {
            if (!(fds[i].revents & (POLLIN | POLLHUP | POLLERR))) continue;
            ssize_t got = ::read(fds[i].fd, buf.data(), buf.size());
            if (got > 0) {
                (i == 0 ? res.out : res.err).append(buf.data(), static_cast<std::size_t>(got));
            } else if (got == 0 || errno != EINTR) {
                (i == 0 ? out_open : err_open) = false;
            }
        }
    }
    int status = 0;
    while (::waitpid(pid, &status, 0) < 0 && errno == EINTR) {
    }
    res.exit_status = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
    return res;
}

DryRunResult run_fit_params(const std::string& binary, const std::string& model_path,
                            const std::vector<std::string>& engine_args, std::chrono::seconds timeout) {
    std::vector<std::string> argv{binary, "-m", model_path};
    argv.insert(argv.end(), engine_args.begin(), engine_args.end());
    argv.insert(argv.end(), {"--fit-print", "on"});
    auto res = run_capture(argv, timeout);
    if (res.timed_out)
        throw std::runtime_error(fmt::format("llama-fit-params did not finish within {} s", timeout.count()));
    if (res.exit_status != 0) {
        std::string_view tail = res.err;
        if (tail.size() > 800) tail = tail.substr(tail.size() - 800);
        throw std::runtime_error(
            fmt::format("llama-fit-params exited with status {}; stderr ends: {}", res.exit_status, tail));
    }
    return parse_fit_print(res.out);
}

}  // namespace loch::plan
