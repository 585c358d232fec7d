// Process: fork+execve with its own group and PDEATHSIG; output into the log file or a pipe; pidfd on Asio.
#include "engines/process.hpp"

#include <fcntl.h>
#include <linux/close_range.h>
#include <poll.h>
#include <sys/inotify.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <array>
#include <boost/asio/co_spawn.hpp>
#include <boost/asio/detached.hpp>
#include <boost/asio/experimental/awaitable_operators.hpp>
#include <boost/asio/posix/stream_descriptor.hpp>
#include <boost/asio/redirect_error.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <cerrno>
#include <csignal>
#include <cstring>
#include <ctime>

#include <fmt/format.h>

#include "core/time_text.hpp"
#include "engines/fd.hpp"

extern char** environ;

namespace loch::engines {

namespace asio = boost::asio;

namespace {

std::optional<std::string> resolve_program(const std::string& prog,
                                           const std::map<std::string, std::string>& env_add) {
    if (prog.find('/') != std::string::npos) return prog;
    std::string path;
    if (auto it = env_add.find("PATH"); it != env_add.end())
        path = it->second;
    else if (const char* p = std::getenv("PATH"))
        path = p;
    std::string_view rest(path);
    while (true) {
        const auto colon = rest.find(':');
        std::string dir(rest.substr(0, colon));
        if (!dir.empty()) {
            const std::string cand = dir + "/" + prog;
            struct stat st {};
            if (::stat(cand.c_str(), &st) == 0 && S_ISREG(st.st_mode) && ::access(cand.c_str(), X_OK) == 0)
                return cand;
        }
        if (colon == std::string_view::npos) break;
        rest.remove_prefix(colon + 1);
    }
    return std::nullopt;
}

void write_all(int fd, std::string_view data) {
    while (!data.empty()) {
        const ssize_t n = ::write(fd, data.data(), data.size());
        if (n < 0 && errno == EINTR) continue;
        if (n <= 0) return;  // a full disk must not stop the engine; the ring still has the lines
        data.remove_prefix(static_cast<std::size_t>(n));
    }
}

// In the child between fork and exec: only async-signal-safe calls.
[[noreturn]] void child_exec(pid_t parent, int devnull, int out_w, int err_w, const char* cwd,
                             const char* path, char* const argv[], char* const envp[]) {
    ::setpgid(0, 0);
    // Die with loch. If loch died before the prctl took effect, the parent is already someone else.
    ::prctl(PR_SET_PDEATHSIG, SIGKILL);
    if (::getppid() != parent) ::_exit(127);
    // When a memory limit is hit, the OOM killer should take an engine, not loch: loch outlives it to say
    // why it died (the cgroup's oom_kill counter) and to answer the requests it held. Raising one's own
    // score needs no privilege; a failure leaves the default.
    if (const int fd = ::open("/proc/self/oom_score_adj", O_WRONLY | O_CLOEXEC); fd >= 0) {
        [[maybe_unused]] auto w = ::write(fd, "500", 3);
        ::close(fd);
    }
    // Signal state is inherited through exec: loch may ignore SIGPIPE or block signals; the engine must not.
    sigset_t none;
    ::sigemptyset(&none);
    ::sigprocmask(SIG_SETMASK, &none, nullptr);
    struct sigaction dfl {};
    dfl.sa_handler = SIG_DFL;
    for (int s = 1; s < NSIG; ++s) {
        if (s != SIGKILL && s != SIGSTOP) ::sigaction(s, &dfl, nullptr);
    }
    ::dup2(devnull, 0);
    ::dup2(out_w, 1);
    ::dup2(out_w, 2);
    // Every other descriptor closes at exec (the error pipe must stay open until then).
    if (::close_range(3, ~0U, CLOSE_RANGE_CLOEXEC) != 0) {
        for (int fd = 3; fd < 4096; ++fd) {
            if (fd != err_w) ::fcntl(fd, F_SETFD, FD_CLOEXEC);
        }
    }
    if (cwd != nullptr && ::chdir(cwd) != 0) {
        const int e = errno;
        [[maybe_unused]] auto r = ::write(err_w, &e, sizeof e);
        ::_exit(127);
    }
    ::execve(path, argv, envp);
    const int e = errno;
    [[maybe_unused]] auto r = ::write(err_w, &e, sizeof e);
    ::_exit(127);
}

// How long spawn() waits for the child to exec (or report why it could not). exec of an engine binary takes
// milliseconds; the limit only matters when something is badly wrong.
constexpr std::chrono::milliseconds kExecResultLimit{10'000};
constexpr ssize_t kExecTimedOut = -2;

// Reads the child's errno from the error pipe: > 0 when exec failed, 0 when the pipe closed at exec, -1 on a
// read error, kExecTimedOut when neither happened within `limit`.
ssize_t read_exec_result(int fd, int& child_errno, std::chrono::milliseconds limit) {
    const auto deadline = std::chrono::steady_clock::now() + limit;
    for (;;) {
        const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
            deadline - std::chrono::steady_clock::now());
        if (left.count() <= 0) return kExecTimedOut;
        pollfd p{fd, POLLIN, 0};
        const int r = ::poll(&p, 1, static_cast<int>(left.count()));
        if (r < 0 && errno == EINTR) continue;
        if (r < 0) return -1;
        if (r == 0) continue;  // the deadline is checked above
        const ssize_t n = ::read(fd, &child_errno, sizeof child_errno);
        if (n < 0 && errno == EINTR) continue;
        return n;
    }
}

// Waits for a child of spawn() that will not be returned (it failed before becoming the engine), so that no
// zombie is left; `kill` first when it may still be running.
void reap_failed_child(pid_t pid, bool kill) {
    if (kill) {
        ::kill(-pid, SIGKILL);
        ::kill(pid, SIGKILL);  // (also before its own setpgid)
    }
    int st = 0;
    while (::waitpid(pid, &st, 0) < 0 && errno == EINTR) {
    }
}

}  // namespace

struct Process::Impl {
    Impl(asio::any_io_executor ex, std::size_t ring_lines)
        : out(ex),
          pidfd(ex),
          writes(ex),
          size_events(ex),
          exit_signal(ex),
          output_signal(ex),
          drain_timer(ex),
          rotate_timer(ex),
          ring(ring_lines) {
        exit_signal.expires_at(asio::steady_timer::time_point::max());
        output_signal.expires_at(asio::steady_timer::time_point::max());
    }

    pid_t pid = -1;
    std::string tag;
    std::uint64_t start_ticks = 0;
    std::chrono::system_clock::time_point started_at{};
    asio::posix::stream_descriptor out;
    asio::posix::stream_descriptor pidfd;
    asio::posix::stream_descriptor writes;       // inotify on the log file while output is watched
    asio::posix::stream_descriptor size_events;  // inotify on the log file: wakes the size check
    asio::steady_timer exit_signal;              // never expires: cancelled to wake every waiter at exit
    asio::steady_timer output_signal;            // never expires: cancelled when the process writes (watched)
    asio::steady_timer drain_timer;              // bounds the wait for the pipe's EOF after the process ended
    asio::steady_timer rotate_timer;             // with a log file: the size check
    Fd log_fd;
    std::filesystem::path log_file;
    std::uint64_t log_max_bytes = 0;
    std::chrono::milliseconds log_check_every{5000};
    std::uint64_t log_start = 0;  // where this run's output begins in the log file
    LogRing ring;                 // without a log file
    bool eof = false;
    bool watching_output = false;
    bool wrote = false;  // output since the last async_wait_output_for (while watched)
    bool reaped = false;
    bool exited = false;
    bool abandoned = false;  // the Process is gone; the child is reaped by watch_exit alone
    std::optional<int> status;

    // Read-write: loch reads the tail back through the same descriptor (pread ignores O_APPEND).
    void open_log() { log_fd = Fd(::open(log_file.c_str(), O_RDWR | O_CREAT | O_APPEND | O_CLOEXEC, 0644)); }

    std::uint64_t log_size() const {
        struct stat st {};
        return ::fstat(log_fd.get(), &st) == 0 ? static_cast<std::uint64_t>(st.st_size) : 0;
    }

    // The child holds the same open file (O_APPEND): copy, then truncate in place. What the child writes
    // between the two is lost (logrotate's copytruncate has the same window); renaming would leave the
    // child writing into <log_file>.1 for the rest of its run.
    void rotate_if_large() {
        if (log_fd.get() < 0 || log_max_bytes == 0 || log_size() < log_max_bytes) return;
        std::error_code ec;
        std::filesystem::copy_file(log_file, log_file.string() + ".1",
                                   std::filesystem::copy_options::overwrite_existing, ec);
        if (::ftruncate(log_fd.get(), 0) == 0) log_start = 0;
    }

    std::vector<std::string> file_tail(std::size_t n) const {
        // Enough bytes for n lines of the usual length, bounded: a tail is for reading, not for copying logs.
        const std::uint64_t size = log_size();
        const std::uint64_t from_start = size > log_start ? size - log_start : 0;
        const std::uint64_t want =
            std::min<std::uint64_t>({from_start, std::max<std::uint64_t>(n, 1) * 512, 16u << 20});
        std::string buf(want, '\0');
        const auto got = ::pread(log_fd.get(), buf.data(), want, static_cast<off_t>(size - want));
        buf.resize(got > 0 ? static_cast<std::size_t>(got) : 0);
        std::string_view text(buf);
        if (want < from_start) {  // started mid-line: drop the fragment
            const auto nl = text.find('\n');
            text = nl == std::string_view::npos ? std::string_view() : text.substr(nl + 1);
        }
        LogRing r(n);
        r.append(text);
        r.finish();
        return r.lines();
    }

    void mark_exited() {
        if (exited) return;
        exited = true;
        exit_signal.cancel();
        rotate_timer.cancel();
        if (size_events.is_open()) size_events.cancel();
        stop_watching_output();
    }

    void note_output() {
        if (!watching_output) return;
        wrote = true;
        output_signal.cancel();
    }
    void stop_watching_output() {
        watching_output = false;
        if (writes.is_open()) ::close(writes.release());
        output_signal.cancel();
    }

    // Never blocks: true once the process is reaped, false while it still runs. Reaps with the leader still a
    // zombie first, so that killing its leftover group members can never hit a recycled PID: while the zombie
    // exists its PID (= the group id) cannot be reused. A readiness of the pidfd is only a hint to call this:
    // loch never waits for a child it has not seen exit (a blocking wait4 on a live engine once stopped every
    // request for minutes).
    bool try_reap() {
        if (reaped) return true;
        siginfo_t info{};
        int r;
        do {
            r = ::waitid(P_PID, static_cast<id_t>(pid), &info, WEXITED | WNOWAIT | WNOHANG);
        } while (r < 0 && errno == EINTR);
        if (r == 0 && info.si_pid == 0) return false;  // still running (or stopped)
        int st = 0;
        if (r == 0) {
            ::kill(-pid, SIGKILL);
            pid_t w;
            do {
                w = ::waitpid(pid, &st, WNOHANG);
            } while (w < 0 && errno == EINTR);
            if (w == 0) return false;  // (cannot happen after WNOWAIT saw it exit; never wait for it)
        }
        // r < 0: ECHILD, not ours to wait for any more; nothing left to reap.
        reaped = true;
        status = st;
        // Descendants that left the group (setsid) still carry the tag.
        kill_tagged(tag, "/proc", start_ticks);
        return true;
    }
};

namespace {

// Closes an Asio descriptor after taking it out of the reactor's epoll set. Asio's close() leaves that to the
// kernel, which removes an epoll entry only when the last reference to the file goes: a child forked but not
// yet exec'd still holds one, and the stale entry can then deliver events to the reactor state that Asio
// reuses for the next descriptor (the next engine's pidfd). release() deregisters (EPOLL_CTL_DEL) first.
void close_deregistered(asio::posix::stream_descriptor& d) {
    if (!d.is_open()) return;
    const int fd = d.release();  // also ends pending operations with operation_aborted
    if (fd >= 0) ::close(fd);
}

}  // namespace

namespace {

asio::awaitable<void> read_output(std::shared_ptr<Process::Impl> impl) {
    std::array<char, 16384> buf{};
    for (;;) {
        boost::system::error_code ec;
        const std::size_t n = co_await impl->out.async_read_some(
            asio::buffer(buf), asio::redirect_error(asio::use_awaitable, ec));
        if (n > 0) {
            impl->ring.append(std::string_view(buf.data(), n));
            impl->note_output();
        }
        if (ec) break;
    }
    impl->ring.finish();
    impl->eof = true;
    impl->drain_timer.cancel();
}

// While output is watched, with a log file: every write of the engine to it (inotify IN_MODIFY). The events
// are only counted, never parsed; the descriptor is closed when the watch ends.
asio::awaitable<void> watch_log_writes(std::shared_ptr<Process::Impl> impl) {
    std::array<char, 4096> buf{};
    for (;;) {
        boost::system::error_code ec;
        const std::size_t n = co_await impl->writes.async_read_some(
            asio::buffer(buf), asio::redirect_error(asio::use_awaitable, ec));
        if (ec || !impl->watching_output) break;
        if (n > 0) impl->note_output();
    }
}

// With a log file: its size is checked (for rotation) after the engine writes to it, at most once per
// log_check_every — inotify's IN_MODIFY wakes the check, so an idle engine, which writes nothing, costs loch
// no wake at all (issue 55). Where inotify is unavailable: a check every log_check_every.
// (The watch is set up by spawn(), before the child can write: a write before it would wake nothing.)
asio::awaitable<void> watch_log_size(std::shared_ptr<Process::Impl> impl) {
    const bool on_writes = impl->size_events.is_open();
    std::array<char, 4096> events{};
    while (!impl->exited) {
        boost::system::error_code ec;
        if (on_writes) {
            // A read, not a readiness wait: the reactor's epoll is edge-triggered, and the events queued
            // during the pause below came with no wait pending; a read takes them at once.
            co_await impl->size_events.async_read_some(asio::buffer(events),
                                                       asio::redirect_error(asio::use_awaitable, ec));
            if (ec || impl->exited) break;
            // The events are only a wake-up: drop the rest (the kernel merges repeats of one meanwhile).
            while (::read(impl->size_events.native_handle(), events.data(), events.size()) > 0) {
            }
            impl->rotate_if_large();
        }
        // Writes during this pause are queued and wake the next check at once, after it.
        impl->rotate_timer.expires_after(impl->log_check_every);
        co_await impl->rotate_timer.async_wait(asio::redirect_error(asio::use_awaitable, ec));
        if (ec || impl->exited) break;
        if (!on_writes) impl->rotate_if_large();
    }
    close_deregistered(impl->size_events);
}

// A pidfd turns readable when its process exits; a wake without an exit (a stale reactor event, an error) is
// answered by looking again a little later, never by waiting on the process.
constexpr std::chrono::milliseconds kRecheckAfterFalseWake{20};

asio::awaitable<void> watch_exit(std::shared_ptr<Process::Impl> impl) {
    boost::system::error_code ec;
    asio::steady_timer recheck(impl->pidfd.get_executor());
    for (;;) {
        if (impl->pidfd.is_open()) {
            co_await impl->pidfd.async_wait(asio::posix::descriptor_base::wait_read,
                                            asio::redirect_error(asio::use_awaitable, ec));
        }
        if (impl->exited) co_return;
        if (impl->try_reap()) break;
        recheck.expires_after(kRecheckAfterFalseWake);
        co_await recheck.async_wait(asio::redirect_error(asio::use_awaitable, ec));
        if (impl->exited) co_return;
        if (impl->try_reap()) break;
    }
    close_deregistered(impl->pidfd);
    if (!impl->eof && !impl->abandoned) {
        // Let the reader drain what the engine wrote last (its dying words are the useful ones).
        impl->drain_timer.expires_after(std::chrono::milliseconds(500));
        co_await impl->drain_timer.async_wait(asio::redirect_error(asio::use_awaitable, ec));
    }
    impl->mark_exited();
    if (impl->abandoned) close_deregistered(impl->out);
}

}  // namespace

std::unique_ptr<Process> Process::spawn(asio::any_io_executor ex, const SpawnSpec& spec) {
    if (spec.argv.empty() || spec.argv[0].empty()) throw SpawnError("empty argv: nothing to start", EINVAL);
    const auto path = resolve_program(spec.argv[0], spec.env_add);
    if (!path) throw SpawnError("'" + spec.argv[0] + "' not found on PATH", ENOENT);

    // Everything the child needs is prepared before fork: after it, only async-signal-safe calls.
    const std::string tag = random_token();  // unique per spawn: never matches a process loch did not start
    std::vector<std::string> env_strings;
    for (char** e = environ; e != nullptr && *e != nullptr; ++e) {
        const std::string_view kv(*e);
        const std::string key(kv.substr(0, kv.find('=')));
        if (spec.env_add.count(key) == 0 && key != kTagVariable && inherited_env_allowed(key))
            env_strings.emplace_back(kv);
    }
    for (const auto& [k, v] : spec.env_add)
        if (k != kTagVariable) env_strings.push_back(k + "=" + v);
    env_strings.push_back(std::string(kTagVariable) + "=" + tag);
    std::vector<char*> argv_c, envp_c;
    for (const auto& a : spec.argv) argv_c.push_back(const_cast<char*>(a.c_str()));
    argv_c.push_back(nullptr);
    for (const auto& e : env_strings) envp_c.push_back(const_cast<char*>(e.c_str()));
    envp_c.push_back(nullptr);
    const std::string cwd = spec.cwd.string();

    Fd devnull(::open("/dev/null", O_RDONLY | O_CLOEXEC));
    if (devnull.get() < 0) throw SpawnError("open /dev/null: " + errno_text(errno), errno);
    int err_p[2];
    if (::pipe2(err_p, O_CLOEXEC) != 0) throw SpawnError("pipe: " + errno_text(errno), errno);
    Fd err_r(err_p[0]), err_w(err_p[1]);

    auto impl = std::make_shared<Impl>(ex, spec.ring_lines);
    Fd out_r, out_w;  // the pipe, when there is no log file
    if (spec.log_file.empty()) {
        int out_p[2];
        if (::pipe2(out_p, O_CLOEXEC) != 0) throw SpawnError("pipe: " + errno_text(errno), errno);
        out_r = Fd(out_p[0]);
        out_w = Fd(out_p[1]);
    } else {
        std::error_code ec;
        std::filesystem::create_directories(spec.log_file.parent_path(), ec);
        impl->log_file = spec.log_file;
        impl->log_max_bytes = spec.log_max_bytes;
        impl->log_check_every = spec.log_check_every;
        impl->open_log();
        if (impl->log_fd.get() < 0) {
            const int e = errno;
            throw SpawnError("cannot open engine log " + spec.log_file.string() + ": " + errno_text(e), e);
        }
        impl->rotate_if_large();
        std::string header = "\n---- loch " + iso8601_utc(std::chrono::system_clock::now()) + ": starting";
        for (const auto& a : spec.argv) header += " " + a;
        write_all(impl->log_fd.get(), header + " ----\n");
        impl->log_start = impl->log_size();
        impl->eof = true;  // nothing to drain
        // What wakes the size check (watch_log_size): the child's writes, watched from before it starts.
        Fd events(::inotify_init1(IN_NONBLOCK | IN_CLOEXEC));
        if (events.get() >= 0 && ::inotify_add_watch(events.get(), impl->log_file.c_str(), IN_MODIFY) >= 0)
            impl->size_events.assign(events.release());
    }
    const int child_out = spec.log_file.empty() ? out_w.get() : impl->log_fd.get();

    const pid_t parent = ::getpid();
    const pid_t pid = ::fork();
    if (pid < 0) throw SpawnError("fork: " + errno_text(errno), errno);
    if (pid == 0) {
        child_exec(parent, devnull.get(), child_out, err_w.get(), cwd.empty() ? nullptr : cwd.c_str(),
                   path->c_str(), argv_c.data(), envp_c.data());
    }
    ::setpgid(pid, pid);  // also from here: whichever runs first, the group exists before we signal it
    out_w.reset();
    err_w.reset();

    // exec succeeded ⇔ the error pipe closes without data. The wait is bounded: it runs on loch's only
    // thread, and a child stuck before exec (a stopped or starved machine, a debugger) must not stop every
    // other request with it.
    int child_errno = 0;
    const ssize_t n = read_exec_result(err_r.get(), child_errno, kExecResultLimit);
    if (n == kExecTimedOut) {
        reap_failed_child(pid, /*kill=*/true);
        throw SpawnError(
            fmt::format("cannot start {}: the child did not reach exec within {} s", *path,
                        std::chrono::duration_cast<std::chrono::seconds>(kExecResultLimit).count()),
            ETIMEDOUT);
    }
    if (n > 0) {
        reap_failed_child(pid, /*kill=*/false);  // it exits with 127 after telling why
        throw SpawnError("cannot start " + *path + ": " + errno_text(child_errno), child_errno);
    }

    impl->pid = pid;
    impl->tag = tag;
    impl->started_at = std::chrono::system_clock::now();
    impl->start_ticks = proc_start_ticks(pid).value_or(0);
    // The syscall directly: glibc 2.36's <sys/pidfd.h> lacks extern "C" for C++.
    Fd pfd(static_cast<int>(::syscall(SYS_pidfd_open, pid, 0)));
    if (pfd.get() < 0) {
        const int e = errno;
        reap_failed_child(pid, /*kill=*/true);
        throw SpawnError("pidfd_open: " + errno_text(e) + " (loch needs Linux 5.3 or newer)", e);
    }
    impl->pidfd.assign(pfd.release());
    if (out_r.get() >= 0) {
        impl->out.assign(out_r.release());
        asio::co_spawn(ex, read_output(impl), asio::detached);
    } else {
        asio::co_spawn(ex, watch_log_size(impl), asio::detached);
    }
    asio::co_spawn(ex, watch_exit(impl), asio::detached);
    return std::unique_ptr<Process>(new Process(std::move(impl)));
}

Process::Process(std::shared_ptr<Impl> impl) : impl_(std::move(impl)) {}

// SIGKILLs the group if it still runs. It is reaped here when it is already gone, else by watch_exit as soon
// as it is (a dying engine may take seconds to give its GPU memory back: loch's thread must not wait for it).
Process::~Process() {
    if (!impl_) return;
    impl_->abandoned = true;
    if (!impl_->reaped) ::kill(-impl_->pid, SIGKILL);
    impl_->drain_timer.cancel();
    impl_->rotate_timer.cancel();
    if (impl_->size_events.is_open()) impl_->size_events.cancel();
    impl_->stop_watching_output();
    if (!impl_->try_reap()) return;  // watch_exit finishes the job
    if (!impl_->exited) impl_->mark_exited();
    close_deregistered(impl_->pidfd);
    // Nobody can read this process's output any more: stop the reader even if an escaped grandchild
    // (one that left the group with setsid) still holds the pipe.
    close_deregistered(impl_->out);
}

pid_t Process::pid() const {
    return impl_->pid;
}
pid_t Process::pgid() const {
    return impl_->pid;
}
const std::string& Process::tag() const {
    return impl_->tag;
}
std::uint64_t Process::start_ticks() const {
    return impl_->start_ticks;
}
std::chrono::system_clock::time_point Process::started_at() const {
    return impl_->started_at;
}
bool Process::exited() const {
    return impl_->exited;
}
std::optional<int> Process::wait_status() const {
    return impl_->exited ? impl_->status : std::nullopt;
}
std::vector<std::string> Process::output_tail(std::size_t n) const {
    return impl_->log_fd.get() >= 0 ? impl_->file_tail(n) : impl_->ring.tail(n);
}
const std::filesystem::path& Process::log_file() const {
    return impl_->log_file;
}

void Process::signal_group(int sig) {
    // Only while the leader is not reaped: its PID (= the group id) cannot have been recycled.
    if (!impl_->reaped) ::kill(-impl_->pid, sig);
}

void Process::poll_exit() {
    boost::system::error_code ec;
    if (impl_->pidfd.is_open()) impl_->pidfd.cancel(ec);  // the watch's wait ends at once and it looks
}

asio::awaitable<int> Process::async_wait() {
    auto impl = impl_;  // this Process may be destroyed while we wait; only touch impl after resuming
    while (!impl->exited) {
        boost::system::error_code ec;
        co_await impl->exit_signal.async_wait(asio::redirect_error(asio::use_awaitable, ec));
    }
    co_return impl->status.value_or(0);
}

asio::awaitable<bool> Process::async_wait_for(std::chrono::milliseconds timeout) {
    using namespace boost::asio::experimental::awaitable_operators;
    auto impl = impl_;
    if (impl->exited) co_return true;
    asio::steady_timer t(co_await asio::this_coro::executor, timeout);
    boost::system::error_code ec1, ec2;
    // Whichever completes first cancels the other (per-operation cancellation: other waiters are untouched).
    co_await (impl->exit_signal.async_wait(asio::redirect_error(asio::use_awaitable, ec1)) ||
              t.async_wait(asio::redirect_error(asio::use_awaitable, ec2)));
    co_return impl->exited;
}

void Process::watch_output() {
    auto& impl = *impl_;
    if (impl.watching_output || impl.exited) return;
    impl.watching_output = true;
    impl.wrote = false;
    if (impl.log_file.empty()) return;  // the pipe's reader tells
    Fd fd(::inotify_init1(IN_NONBLOCK | IN_CLOEXEC));
    if (fd.get() < 0 || ::inotify_add_watch(fd.get(), impl.log_file.c_str(), IN_MODIFY) < 0) return;
    impl.writes.assign(fd.release());
    asio::co_spawn(impl.writes.get_executor(), watch_log_writes(impl_), asio::detached);
}

void Process::stop_watching_output() {
    impl_->stop_watching_output();
}

asio::awaitable<bool> Process::async_wait_output_for(std::chrono::milliseconds timeout) {
    using namespace boost::asio::experimental::awaitable_operators;
    auto impl = impl_;
    if (impl->exited || std::exchange(impl->wrote, false)) co_return true;
    asio::steady_timer t(co_await asio::this_coro::executor, timeout);
    boost::system::error_code ec1, ec2, ec3;
    co_await (impl->output_signal.async_wait(asio::redirect_error(asio::use_awaitable, ec1)) ||
              impl->exit_signal.async_wait(asio::redirect_error(asio::use_awaitable, ec2)) ||
              t.async_wait(asio::redirect_error(asio::use_awaitable, ec3)));
    co_return impl->exited || std::exchange(impl->wrote, false);
}

}  // namespace loch::engines
