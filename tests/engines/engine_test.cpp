// Engine supervision with small real programs (sleep, sh) standing in for an engine where a real
// llama-server cannot show the behaviour on demand: a health endpoint that answers 503 then 200, a process
// that ignores SIGTERM, one that forks a grandchild. The real llama-server runs in tests/integration/engines.
#include "engines/engine.hpp"

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <boost/asio/co_spawn.hpp>
#include <boost/asio/detached.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/redirect_error.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <boost/asio/use_future.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>
#include <csignal>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <thread>

#include "engines/process.hpp"
#include "support/proc_facts.hpp"
#include "support/temp_dir.hpp"

namespace loch::engines {
namespace {

namespace asio = boost::asio;
namespace beast = boost::beast;
namespace http = beast::http;
using namespace std::chrono_literals;
using ::testing::HasSubstr;

// Runs `aw` on `ioc` to completion and returns its value.
template <class T>
T run(asio::io_context& ioc, asio::awaitable<T> aw) {
    auto fut = asio::co_spawn(ioc, std::move(aw), asio::use_future);
    ioc.restart();
    while (fut.wait_for(0s) != std::future_status::ready) ioc.run_one_for(50ms);
    return fut.get();
}

void run_for(asio::io_context& ioc, std::chrono::milliseconds d) {
    ioc.restart();
    ioc.run_for(d);
}

// A health endpoint double: answers each GET with the next status of `script` (the last one repeats).
struct FakeHealth {
    FakeHealth(asio::io_context& ioc, std::vector<unsigned> script)
        : acceptor(ioc, {asio::ip::make_address("127.0.0.1"), 0}), statuses(std::move(script)) {
        asio::co_spawn(ioc, serve(), asio::detached);
    }
    std::uint16_t port() const { return acceptor.local_endpoint().port(); }
    asio::awaitable<void> serve() {
        for (;;) {
            boost::system::error_code ec;
            auto sock = co_await acceptor.async_accept(asio::redirect_error(asio::use_awaitable, ec));
            if (ec) co_return;
            beast::tcp_stream stream(std::move(sock));
            beast::flat_buffer buf;
            http::request<http::string_body> req;
            co_await http::async_read(stream, buf, req, asio::redirect_error(asio::use_awaitable, ec));
            if (ec) continue;
            const unsigned st = statuses[std::min(hits, statuses.size() - 1)];
            ++hits;
            paths.push_back(std::string(req.target()));
            http::response<http::string_body> res{static_cast<http::status>(st), 11};
            res.body() = st == 200 ? R"({"status":"ok"})" : R"({"error":{"message":"Loading model"}})";
            res.prepare_payload();
            co_await http::async_write(stream, res, asio::redirect_error(asio::use_awaitable, ec));
        }
    }
    asio::ip::tcp::acceptor acceptor;
    std::vector<unsigned> statuses;
    std::size_t hits = 0;
    std::vector<std::string> paths;
};

EngineSpec spec_for(std::vector<std::string> argv, std::uint16_t port, const test::TempDir& dir) {
    EngineSpec s;
    s.model_name = "double";
    s.kind = "command";
    s.argv = std::move(argv);
    s.port = port;
    s.health_path = "/health";
    s.startup_timeout = 30s;
    s.stop_grace = 1s;
    s.log_file = dir / "logs" / "double.log";
    return s;
}

class EngineTest : public ::testing::Test {
  protected:
    asio::io_context ioc;
    test::TempDir dir{"loch-engine"};
};

TEST_F(EngineTest, BecomesReadyAfterLoadingAndStopsWithSigterm) {
    FakeHealth health(ioc, {503, 503, 200});
    StateFile state(dir / "state");
    auto e = Engine::create(ioc.get_executor(), spec_for({"/bin/sleep", "1000"}, health.port(), dir), &state);
    EXPECT_EQ(e->state(), EngineState::created);
    const StartResult r = run(ioc, e->start());
    ASSERT_TRUE(r.ready) << (r.failure ? r.failure->summary : "");
    EXPECT_EQ(e->state(), EngineState::ready);
    EXPECT_EQ(health.hits, 3u);  // 503 "loading" means wait, not fail
    EXPECT_EQ(health.paths.at(0), "/health");
    ASSERT_TRUE(e->load_time().has_value());
    const pid_t pid = *e->pid();
    EXPECT_TRUE(test::process_alive(pid));
    ASSERT_EQ(state.records().size(), 1u);
    EXPECT_EQ(state.records()[0].pid, pid);
    EXPECT_EQ(state.records()[0].argv, (std::vector<std::string>{"/bin/sleep", "1000"}));

    std::optional<ExitReport> seen;
    e->on_exit([&](const ExitReport& x) { seen = x; });
    const ExitReport stopped = run(ioc, e->stop());
    EXPECT_EQ(stopped.kind, ExitKind::stopped);
    EXPECT_EQ(stopped.signal, SIGTERM);
    EXPECT_EQ(e->state(), EngineState::stopped);
    EXPECT_FALSE(test::process_alive(pid));
    ASSERT_TRUE(seen.has_value());
    EXPECT_EQ(seen->kind, ExitKind::stopped);
    EXPECT_TRUE(state.records().empty());
    const nlohmann::json j = e->status_json();
    EXPECT_EQ(j["state"], "stopped");
    EXPECT_EQ(j["exit"]["kind"], "stopped");
}

TEST_F(EngineTest, WithoutAHealthPathItIsReadyWhenItsPortAccepts) {
    // A server that listens only after a moment (python's own http.server has no health path).
    const auto port = find_free_port();
    auto spec = spec_for({"/usr/bin/python3", "-c",
                          "import time, socket; time.sleep(0.5); s = socket.socket(); "
                          "s.bind(('127.0.0.1', " +
                              std::to_string(port) + ")); s.listen(); time.sleep(1000)"},
                         port, dir);
    spec.health_path.clear();
    auto e = Engine::create(ioc.get_executor(), spec);
    const auto t0 = std::chrono::steady_clock::now();
    const StartResult r = run(ioc, e->start());
    ASSERT_TRUE(r.ready) << (r.failure ? r.failure->summary : "");
    EXPECT_GE(std::chrono::steady_clock::now() - t0, 450ms);  // not before it listened
    EXPECT_EQ(run(ioc, e->stop()).kind, ExitKind::stopped);
}

TEST_F(EngineTest, ExitDuringStartupFailsAtOnceWithTheClassifiedExit) {
    auto s = spec_for(
        {"/bin/sh", "-c", "echo 'loading model'; echo 'error: model file is broken' >&2; exit 3"}, 1, dir);
    s.startup_timeout = 60s;
    auto e = Engine::create(ioc.get_executor(), s);
    const StartResult r = run(ioc, e->start());
    ASSERT_FALSE(r.ready);
    ASSERT_TRUE(r.failure.has_value());
    EXPECT_LT(r.took, 10s);  // not the startup timeout
    EXPECT_EQ(r.failure->kind, ExitKind::exit_code);
    EXPECT_EQ(r.failure->exit_code, 3);
    EXPECT_EQ(r.failure->matched_line, "error: model file is broken");
    EXPECT_THAT(r.failure->log_tail, ::testing::ElementsAre("loading model", "error: model file is broken"));
    EXPECT_EQ(e->state(), EngineState::failed);
}

TEST_F(EngineTest, StartupTimeoutKillsTheGroup) {
    auto s = spec_for({"/bin/sleep", "1000"}, 1, dir);  // port 1: nothing ever answers
    s.startup_timeout = 1s;
    auto e = Engine::create(ioc.get_executor(), s);
    const StartResult r = run(ioc, e->start());
    ASSERT_FALSE(r.ready);
    EXPECT_EQ(r.failure->kind, ExitKind::startup_timeout);
    EXPECT_THAT(r.failure->summary, HasSubstr("startup timeout of 1 s"));
    EXPECT_GE(r.took, 1s);
    EXPECT_LT(r.took, 10s);
    EXPECT_FALSE(test::process_alive(*e->pid()));
}

// A process stopped by a signal while loading is not loading: it is killed as hung after the hang limit,
// not left holding its memory and its model's requests until the startup timeout (an hour by default).
TEST_F(EngineTest, AnEngineStoppedWhileLoadingIsKilledAsHungAfterTheHangLimit) {
    auto s = spec_for({"/bin/sh", "-c", "kill -STOP $$; sleep 1000"}, 1, dir);
    s.startup_timeout = 60s;
    s.hang_after = 500ms;
    auto e = Engine::create(ioc.get_executor(), s);
    const StartResult r = run(ioc, e->start());
    ASSERT_FALSE(r.ready);
    ASSERT_TRUE(r.failure.has_value());
    EXPECT_EQ(r.failure->kind, ExitKind::hung);
    EXPECT_THAT(r.failure->summary, HasSubstr("stopped by a signal"));
    EXPECT_GE(r.took, 500ms);
    EXPECT_LT(r.took, 10s);  // not the startup timeout
    EXPECT_FALSE(test::process_alive(*e->pid()));
    EXPECT_EQ(e->state(), EngineState::failed);
}

TEST_F(EngineTest, CrashAfterReadyIsReportedWithSignalName) {
    FakeHealth health(ioc, {200});
    auto e = Engine::create(ioc.get_executor(), spec_for({"/bin/sleep", "1000"}, health.port(), dir));
    ASSERT_TRUE(run(ioc, e->start()).ready);
    std::optional<ExitReport> seen;
    e->on_exit([&](const ExitReport& x) { seen = x; });
    ::kill(*e->pid(), SIGSEGV);
    const ExitReport r = run(ioc, e->wait_exit());
    EXPECT_EQ(r.kind, ExitKind::signal);
    EXPECT_EQ(r.summary, "exit 139 / SIGSEGV");
    ASSERT_TRUE(seen.has_value());
    EXPECT_EQ(seen->summary, "exit 139 / SIGSEGV");
    EXPECT_EQ(e->state(), EngineState::failed);
}

TEST_F(EngineTest, SpawnFailureIsAReportNotAnException) {
    auto e = Engine::create(ioc.get_executor(), spec_for({"/nonexistent/engine", "x"}, 1, dir));
    const StartResult r = run(ioc, e->start());
    ASSERT_FALSE(r.ready);
    EXPECT_EQ(r.failure->kind, ExitKind::spawn_failed);
    EXPECT_THAT(r.failure->summary, HasSubstr("No such file or directory"));
    auto e2 = Engine::create(ioc.get_executor(), spec_for({"no-such-program-on-path"}, 1, dir));
    EXPECT_THAT(run(ioc, e2->start()).failure->summary, HasSubstr("not found on PATH"));
}

TEST_F(EngineTest, StopEscalatesToSigkillAfterTheGrace) {
    FakeHealth health(ioc, {200});
    // Ignores SIGTERM (and so does its sleep, which inherits the disposition).
    auto e = Engine::create(
        ioc.get_executor(),
        spec_for({"/bin/sh", "-c", "trap '' TERM; echo trapped; sleep 1000 & wait"}, health.port(), dir));
    ASSERT_TRUE(run(ioc, e->start()).ready);
    for (int i = 0; i < 100 && e->log_tail(1) != std::vector<std::string>{"trapped"}; ++i) run_for(ioc, 20ms);
    ASSERT_EQ(e->log_tail(1), std::vector<std::string>{"trapped"});
    const auto t0 = std::chrono::steady_clock::now();
    const ExitReport r = run(ioc, e->stop());
    EXPECT_GE(std::chrono::steady_clock::now() - t0, 1s);
    EXPECT_EQ(r.kind, ExitKind::stopped);
    EXPECT_EQ(r.signal, SIGKILL);
    EXPECT_FALSE(test::process_alive(*e->pid()));
}

TEST_F(EngineTest, StopReachesGrandchildrenAndBothOutputStreamsReachTheLogFile) {
    FakeHealth health(ioc, {200});
    auto e = Engine::create(
        ioc.get_executor(),
        spec_for({"/bin/sh", "-c", "sleep 1000 & echo grandchild=$!; echo to-stderr >&2; wait"},
                 health.port(), dir));
    ASSERT_TRUE(run(ioc, e->start()).ready);
    run_for(ioc, 200ms);
    const auto tail = e->log_tail(10);
    ASSERT_EQ(tail.size(), 2u);
    ASSERT_EQ(tail[0].rfind("grandchild=", 0), 0u);
    EXPECT_EQ(tail[1], "to-stderr");
    const pid_t grandchild = std::stoi(tail[0].substr(11));
    EXPECT_TRUE(test::process_alive(grandchild));
    run(ioc, e->stop());
    for (int i = 0; i < 100 && test::process_alive(grandchild); ++i) std::this_thread::sleep_for(20ms);
    EXPECT_FALSE(test::process_alive(grandchild));
    std::ifstream in(dir / "logs" / "double.log");
    const std::string file((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    EXPECT_THAT(file, HasSubstr("---- loch "));
    EXPECT_THAT(file, HasSubstr("grandchild="));
    EXPECT_THAT(file, HasSubstr("to-stderr"));
}

TEST_F(EngineTest, DestroyingARunningEngineKillsIt) {
    FakeHealth health(ioc, {200});
    auto e = Engine::create(ioc.get_executor(), spec_for({"/bin/sleep", "1000"}, health.port(), dir));
    ASSERT_TRUE(run(ioc, e->start()).ready);
    const pid_t pid = *e->pid();
    e.reset();  // SIGKILL; reaped by the loop as soon as it is gone, never waited for on it
    for (int i = 0; i < 100 && std::filesystem::exists("/proc/" + std::to_string(pid)); ++i)
        run_for(ioc, 20ms);
    EXPECT_FALSE(std::filesystem::exists("/proc/" + std::to_string(pid))) << "not reaped (a zombie is left)";
    run_for(ioc, 100ms);  // the background watchers finish without touching the dead engine
}

// The hang found under faults: the exit watch of a newly started engine woke while the engine was alive and
// waited (wait4, blocking) for it on loch's only thread; every request stopped for minutes. Whatever wakes
// the watch (an error, a stale reactor event, a poll), loch never waits for a live child: here the watch is
// woken again and again while the loop must keep turning (a watchdog thread kills the child if it does not,
// and the test fails), then the child is killed and reaped.
TEST(ProcessReap, AWakeOfTheExitWatchWhileTheChildLivesNeverBlocksTheLoop) {
    asio::io_context ioc;
    test::TempDir dir("loch-reap");
    auto p = Process::spawn(ioc.get_executor(), SpawnSpec{{"/bin/sleep", "1000"}, {}, {}, dir / "e.log", 10});
    const pid_t live = p->pid();
    std::atomic<bool> done{false}, rescued{false};
    std::thread watchdog([&] {
        for (int i = 0; i < 60 && !done; ++i) std::this_thread::sleep_for(50ms);
        if (!done) {
            rescued = true;
            ::kill(live, SIGKILL);
        }
    });
    asio::steady_timer tick(ioc);
    int turns = 0;
    for (int i = 0; i < 10; ++i) {
        p->poll_exit();
        tick.expires_after(20ms);
        tick.async_wait([&](auto) { ++turns; });
        run_for(ioc, 30ms);
    }
    done = true;
    watchdog.join();
    EXPECT_FALSE(rescued) << "the loop blocked on a live child";
    EXPECT_EQ(turns, 10);
    EXPECT_FALSE(p->exited());
    p->signal_group(SIGKILL);
    EXPECT_TRUE(run(ioc, p->async_wait_for(5000ms)));
    EXPECT_FALSE(std::filesystem::exists("/proc/" + std::to_string(live) + "/stat")) << "not reaped";
}

// A stopped engine (SIGSTOP) is alive: its exit watch keeps waiting without blocking the loop, and a SIGKILL
// still ends and reaps it.
TEST(ProcessReap, AStoppedChildIsNotExitedAndIsReapedOnceKilled) {
    asio::io_context ioc;
    auto p = Process::spawn(ioc.get_executor(), SpawnSpec{{"/bin/sleep", "1000"}, {}, {}, {}, 10});
    p->signal_group(SIGSTOP);
    EXPECT_FALSE(run(ioc, p->async_wait_for(300ms)));
    EXPECT_FALSE(p->exited());
    p->signal_group(SIGKILL);
    EXPECT_TRUE(run(ioc, p->async_wait_for(5000ms)));
    ASSERT_TRUE(p->wait_status().has_value());
    EXPECT_TRUE(WIFSIGNALED(*p->wait_status()));
    EXPECT_EQ(WTERMSIG(*p->wait_status()), SIGKILL);
}

TEST_F(EngineTest, EngineDiesWithItsParent) {
    // A child process spawns an engine and exits without cleaning up: PR_SET_PDEATHSIG must take the engine.
    int fds[2];
    ASSERT_EQ(::pipe(fds), 0);
    const pid_t child = ::fork();
    ASSERT_GE(child, 0);
    if (child == 0) {
        asio::io_context cioc;
        auto p = Process::spawn(cioc.get_executor(), SpawnSpec{{"/bin/sleep", "1000"}, {}, {}, {}, 10});
        const pid_t engine = p->pid();
        [[maybe_unused]] auto n = ::write(fds[1], &engine, sizeof engine);
        ::_exit(0);  // no destructors: like a crash of loch
    }
    pid_t engine = 0;
    ASSERT_EQ(::read(fds[0], &engine, sizeof engine), static_cast<ssize_t>(sizeof engine));
    ::close(fds[0]);
    ::close(fds[1]);
    int st = 0;
    ::waitpid(child, &st, 0);
    for (int i = 0; i < 250 && test::process_alive(engine); ++i) std::this_thread::sleep_for(20ms);
    EXPECT_FALSE(test::process_alive(engine));
}

// Where in the burst the check lands depends on the machine's load (a loaded CI spreads 200 writes over more
// than one check interval): what must hold is that the file was cut below the limit, the child went on
// writing at its start (O_APPEND: no hole of NULs up to the old size), and the tail is this run's, ending
// with its last line.
void expect_rotated_and_written_from_the_start(const std::filesystem::path& log, std::uintmax_t limit) {
    EXPECT_LT(std::filesystem::file_size(log), limit);
    std::ifstream in(log, std::ios::binary);
    const std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    EXPECT_EQ(text.find('\0'), std::string::npos) << "a hole: the child wrote past the truncation";
    EXPECT_TRUE(text.ends_with("after\n")) << text;
}

void expect_tail_of_this_run_ending_after(const std::vector<std::string>& tail) {
    ASSERT_FALSE(tail.empty());
    EXPECT_EQ(tail.back(), "after");
    for (const auto& line : tail) {
        EXPECT_TRUE(line == "after" || line.starts_with("line-")) << "not this run's: " << line;
    }
}

TEST(ProcessLog, FileIsRotatedWhileTheChildWritesAndTheTailIsThisRunsOnly) {
    asio::io_context ioc;
    test::TempDir dir("loch-rotate");
    SpawnSpec spec;
    spec.argv = {"/bin/sh", "-c", "echo earlier-run; echo no newline at the end | tr -d '\\n'"};
    spec.log_file = dir / "e.log";
    auto first = Process::spawn(ioc.get_executor(), spec);
    EXPECT_EQ(run(ioc, first->async_wait()), 0);
    EXPECT_EQ(first->output_tail(5), (std::vector<std::string>{"earlier-run", "no newline at the end"}));

    // 200 lines (~1.6 KB), a pause longer than the check interval, then one more line.
    spec.argv = {"/bin/sh", "-c",
                 "i=0; while [ $i -lt 200 ]; do echo line-$i; i=$((i+1)); done; sleep 0.4; echo after"};
    spec.log_max_bytes = 1000;
    spec.log_check_every = std::chrono::milliseconds(50);
    auto p = Process::spawn(ioc.get_executor(), spec);
    EXPECT_EQ(run(ioc, p->async_wait()), 0);
    ASSERT_TRUE(std::filesystem::exists(dir / "e.log.1"));
    EXPECT_GE(std::filesystem::file_size(dir / "e.log.1"), 1000u);  // the copy has the lines up to the check
    expect_rotated_and_written_from_the_start(dir / "e.log", 1000u);
    expect_tail_of_this_run_ending_after(p->output_tail(5));

    // Silent first, longer than many check intervals (an idle engine: no check runs, its writes wake it),
    // then the same burst: rotated all the same.
    std::filesystem::remove(dir / "e.log.1");
    spec.argv = {"/bin/sh", "-c",
                 "sleep 0.5; i=0; while [ $i -lt 200 ]; do echo line-$i; i=$((i+1)); done; sleep 0.4; "
                 "echo after"};
    auto quiet_first = Process::spawn(ioc.get_executor(), spec);
    EXPECT_EQ(run(ioc, quiet_first->async_wait()), 0);
    ASSERT_TRUE(std::filesystem::exists(dir / "e.log.1"));
    EXPECT_GE(std::filesystem::file_size(dir / "e.log.1"), 1000u);
    expect_rotated_and_written_from_the_start(dir / "e.log", 1000u);
    expect_tail_of_this_run_ending_after(quiet_first->output_tail(5));
}

TEST(ProcessLog, WithoutAFileTheOutputIsKeptInTheRing) {
    asio::io_context ioc;
    SpawnSpec spec;
    spec.argv = {"/bin/sh", "-c", "i=0; while [ $i -lt 200 ]; do echo line-$i; i=$((i+1)); done"};
    spec.ring_lines = 50;
    auto p = Process::spawn(ioc.get_executor(), spec);
    EXPECT_EQ(run(ioc, p->async_wait()), 0);
    EXPECT_EQ(p->output_tail(1), std::vector<std::string>{"line-199"});
    EXPECT_EQ(p->output_tail(1000).size(), 50u);
}

// The start-up's output watch (the readiness poll wakes on it): a write while watched ends the wait at once,
// with a log file (inotify) and without (the pipe); a wait with nothing written times out; once the watch is
// off, writes no longer end a wait.
TEST(ProcessOutputWatch, AWriteEndsTheWaitOnlyWhileWatchedWithAFileAndWithThePipe) {
    for (const bool with_file : {true, false}) {
        SCOPED_TRACE(with_file ? "log file" : "pipe");
        asio::io_context ioc;
        test::TempDir dir("loch-watch");
        SpawnSpec spec;
        spec.argv = {"/bin/sh", "-c", "sleep 0.3; echo loaded; sleep 0.3; echo once more; sleep 5"};
        if (with_file) spec.log_file = dir / "e.log";
        auto p = Process::spawn(ioc.get_executor(), spec);
        p->watch_output();
        // Nothing yet: the wait times out.
        EXPECT_FALSE(run(ioc, p->async_wait_output_for(std::chrono::milliseconds(100))));
        // "loaded" ends the next wait long before its 5 s.
        const auto t0 = std::chrono::steady_clock::now();
        EXPECT_TRUE(run(ioc, p->async_wait_output_for(std::chrono::milliseconds(5000))));
        EXPECT_LT(std::chrono::steady_clock::now() - t0, std::chrono::milliseconds(2000));
        // Off: "once more" is written, and the wait sleeps out its time.
        p->stop_watching_output();
        EXPECT_FALSE(run(ioc, p->async_wait_output_for(std::chrono::milliseconds(600))));
        p->signal_group(SIGKILL);
        run(ioc, p->async_wait());
    }
}

TEST(FreePort, IsBindable) {
    const auto p = find_free_port();
    EXPECT_GT(p, 1023);
    asio::io_context ioc;
    asio::ip::tcp::acceptor acc(ioc, {asio::ip::make_address("127.0.0.1"), p});
    EXPECT_EQ(acc.local_endpoint().port(), p);
}

}  // namespace
}  // namespace loch::engines
