// support/process — a child process for tests: posix_spawn (no shell), its own process group, stdout and
// stderr into a log file, stopped with SIGTERM then SIGKILL when the object goes away (RAII).
#pragma once

#include <fcntl.h>
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <optional>
#include <sstream>
#include <stdexcept>
#include <string>
#include <system_error>
#include <thread>
#include <vector>

extern char** environ;

namespace loch::test {

class Process {
  public:
    // Starts `exe` with `args` (argv[1..]); output of both streams goes to `log_file` (truncated).
    Process(const std::filesystem::path& exe, const std::vector<std::string>& args,
            std::filesystem::path log_file)
        : log_file_(std::move(log_file)) {
        std::vector<std::string> argv_s;
        argv_s.push_back(exe.string());
        argv_s.insert(argv_s.end(), args.begin(), args.end());
        std::vector<char*> argv;
        for (auto& a : argv_s) argv.push_back(a.data());
        argv.push_back(nullptr);

        posix_spawn_file_actions_t fa;
        posix_spawnattr_t attr;
        posix_spawn_file_actions_init(&fa);
        posix_spawnattr_init(&attr);
        posix_spawn_file_actions_addopen(&fa, 0, "/dev/null", O_RDONLY, 0);
        posix_spawn_file_actions_addopen(&fa, 1, log_file_.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
        posix_spawn_file_actions_adddup2(&fa, 1, 2);
        posix_spawnattr_setflags(&attr, POSIX_SPAWN_SETPGROUP);
        posix_spawnattr_setpgroup(&attr, 0);  // own group: stop() reaches grandchildren too
        const int rc = posix_spawn(&pid_, argv_s[0].c_str(), &fa, &attr, argv.data(), environ);
        posix_spawn_file_actions_destroy(&fa);
        posix_spawnattr_destroy(&attr);
        if (rc != 0) {
            pid_ = -1;
            throw std::system_error(rc, std::generic_category(), "posix_spawn " + exe.string());
        }
    }
    Process(const Process&) = delete;
    Process& operator=(const Process&) = delete;
    ~Process() { stop(); }

    pid_t pid() const { return pid_; }
    const std::filesystem::path& log_file() const { return log_file_; }

    // The exit status once the process has ended (exit code, or 128 + signal); nullopt while it runs.
    std::optional<int> poll() {
        if (exit_status_ || pid_ <= 0) return exit_status_;
        int status = 0;
        const pid_t r = ::waitpid(pid_, &status, WNOHANG);
        if (r == pid_) record(status);
        return exit_status_;
    }
    bool running() { return pid_ > 0 && !poll(); }

    // Waits up to `timeout` for the process to end on its own.
    std::optional<int> wait_for(std::chrono::milliseconds timeout) {
        const auto deadline = std::chrono::steady_clock::now() + timeout;
        while (!poll() && std::chrono::steady_clock::now() < deadline) {
            std::this_thread::sleep_for(std::chrono::milliseconds(20));
        }
        return poll();
    }

    // SIGTERM to the group, SIGKILL after `grace`; returns the exit status.
    std::optional<int> stop(std::chrono::milliseconds grace = std::chrono::seconds(10)) {
        if (pid_ <= 0 || poll()) return exit_status_;
        ::kill(-pid_, SIGTERM);
        if (wait_for(grace)) return exit_status_;
        ::kill(-pid_, SIGKILL);
        int status = 0;
        if (::waitpid(pid_, &status, 0) == pid_) record(status);
        return exit_status_;
    }

    std::string log() const {
        std::ifstream in(log_file_, std::ios::binary);
        std::ostringstream ss;
        ss << in.rdbuf();
        return ss.str();
    }
    std::string log_tail(std::size_t max_bytes = 4000) const {
        std::string s = log();
        return s.size() > max_bytes ? s.substr(s.size() - max_bytes) : s;
    }

  private:
    void record(int status) {
        if (WIFEXITED(status))
            exit_status_ = WEXITSTATUS(status);
        else if (WIFSIGNALED(status))
            exit_status_ = 128 + WTERMSIG(status);
        else
            exit_status_ = -1;
    }

    std::filesystem::path log_file_;
    pid_t pid_ = -1;
    std::optional<int> exit_status_;
};

// Runs a program to completion (with a timeout) and returns its exit status; output goes to `log_file`.
inline int run_to_completion(const std::filesystem::path& exe, const std::vector<std::string>& args,
                             const std::filesystem::path& log_file,
                             std::chrono::milliseconds timeout = std::chrono::seconds(120)) {
    Process p(exe, args, log_file);
    const auto status = p.wait_for(timeout);
    if (!status) {
        p.stop(std::chrono::seconds(2));
        throw std::runtime_error(exe.filename().string() + " did not finish within " +
                                 std::to_string(timeout.count()) + " ms; log:\n" + p.log_tail());
    }
    return *status;
}

}  // namespace loch::test
