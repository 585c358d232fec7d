// State file round trip, single ownership, and stale cleanup that never kills a recycled PID.
#include "engines/state_file.hpp"

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/wait.h>

#include <fstream>
#include <thread>

#include "engines/process.hpp"
#include "support/proc_facts.hpp"
#include "support/process.hpp"
#include "support/temp_dir.hpp"

namespace loch::engines {
namespace {

using namespace std::chrono_literals;
using ::testing::HasSubstr;

bool wait_gone(pid_t pid, std::chrono::milliseconds max = 5000ms) {
    const auto deadline = std::chrono::steady_clock::now() + max;
    while (test::process_alive(pid) && std::chrono::steady_clock::now() < deadline)
        std::this_thread::sleep_for(20ms);
    return !test::process_alive(pid);
}

// A real process that stands in for a stale engine: `sleep`, in its own process group.
struct Sleeper {
    test::TempDir dir{"loch-sleeper"};
    test::Process proc{"/bin/sleep", {"1000"}, dir / "sleep.log"};
    EngineRecord record() {
        EngineRecord r;
        r.model = "stale";
        r.pid = proc.pid();
        r.pgid = proc.pid();
        // /proc/PID/cmdline is readable once exec is done; wait for it.
        for (int i = 0; i < 100 && proc_cmdline(r.pid).value_or(std::vector<std::string>{}).size() != 2;
             ++i) {
            std::this_thread::sleep_for(10ms);
        }
        r.start_ticks = proc_start_ticks(r.pid).value();
        r.argv = proc_cmdline(r.pid).value();
        r.port = 1234;
        return r;
    }
};

TEST(StateFile, RoundTrip) {
    test::TempDir dir("loch-state");
    StateSnapshot s;
    s.owner_pid = 42;
    s.owner_start_ticks = 7;
    s.engines.push_back(
        EngineRecord{"m", 100, 100, 555, {"/bin/llama-server", "-m", "x y.gguf"}, 8081, 1700000000, "t0"});
    write_state(dir / "engines.json", s);
    const auto back = read_state(dir / "engines.json");
    EXPECT_EQ(back.owner_pid, 42);
    EXPECT_EQ(back.owner_start_ticks, 7u);
    EXPECT_EQ(back.engines, s.engines);
    EXPECT_TRUE(read_state(dir / "absent.json").engines.empty());
    std::ofstream(dir / "bad.json") << "{not json";
    EXPECT_THROW(read_state(dir / "bad.json"), std::runtime_error);
}

TEST(StateFile, RecordsWhileRunningAndOneOwnerPerDir) {
    test::TempDir dir("loch-state");
    StateFile sf(dir.path());
    sf.add(EngineRecord{"m", 100, 100, 555, {"x"}, 1, 2});
    EXPECT_EQ(read_state(sf.file()).engines.size(), 1u);
    EXPECT_EQ(read_state(sf.file()).owner_pid, ::getpid());
    try {
        StateFile second(dir.path());
        FAIL() << "a second owner of the same state dir must be refused";
    } catch (const std::runtime_error& e) {
        EXPECT_THAT(e.what(), HasSubstr("is in use by loch pid " + std::to_string(::getpid())));
    }
    sf.remove(100);
    EXPECT_TRUE(read_state(sf.file()).engines.empty());
}

TEST(StaleCleanup, KillsAVerifiedLeftoverEngine) {
    Sleeper s;
    const auto rec = s.record();
    test::TempDir dir("loch-state");
    write_state(dir / "engines.json", StateSnapshot{999999, 1, {rec}});
    const auto res = cleanup_stale(dir.path());
    ASSERT_EQ(res.killed.size(), 1u) << (res.skipped.empty() ? "" : res.skipped[0]);
    EXPECT_EQ(res.killed[0].pid, rec.pid);
    EXPECT_TRUE(wait_gone(rec.pid));
    EXPECT_TRUE(read_state(dir / "engines.json").engines.empty());  // the file is clean afterwards
}

TEST(StaleCleanup, NeverKillsARecycledPid) {
    Sleeper s;
    auto rec = s.record();
    rec.start_ticks += 12345;  // same PID number, different process: what a recycled PID looks like
    auto res = kill_recorded_engines({rec});
    EXPECT_TRUE(res.killed.empty());
    ASSERT_EQ(res.skipped.size(), 1u);
    EXPECT_THAT(res.skipped[0], HasSubstr("start time differs"));
    std::this_thread::sleep_for(100ms);
    EXPECT_TRUE(test::process_alive(rec.pid));

    auto rec2 = s.record();
    rec2.argv = {"/opt/llama-server", "-m", "x.gguf"};  // same PID and start time, other command: refuse too
    res = kill_recorded_engines({rec2});
    EXPECT_TRUE(res.killed.empty());
    EXPECT_THAT(res.skipped.at(0), HasSubstr("command line differs"));
    EXPECT_TRUE(test::process_alive(rec.pid));

    auto rec3 = s.record();
    rec3.pid = 999999999;  // no such process
    res = kill_recorded_engines({rec3});
    EXPECT_THAT(res.skipped.at(0), HasSubstr("no longer running"));
    EXPECT_TRUE(test::process_alive(rec.pid));
}

TEST(ProcInfo, StartTicksAndCmdlineOfThisProcess) {
    EXPECT_GT(proc_start_ticks(::getpid()).value_or(0), 0u);
    EXPECT_FALSE(proc_start_ticks(999999999).has_value());
    const auto cmd = proc_cmdline(::getpid());
    ASSERT_TRUE(cmd.has_value());
    EXPECT_THAT(cmd->at(0), HasSubstr("test_engines"));
}

TEST(ProcInfo, TheStateLetterFollowsTheLastParenthesisOfTheCommand) {
    EXPECT_EQ(proc_state(::getpid()), 'R');
    EXPECT_FALSE(proc_state(999999999).has_value());
    test::TempDir root{"loch-proc"};
    std::filesystem::create_directories(root / "42");
    std::ofstream(root / "42" / "stat") << "42 (a) S (b) T 1 42 42 0 -1 4194560\n";
    EXPECT_EQ(proc_state(42, root.path()), 'T');
}

}  // namespace
}  // namespace loch::engines
