// Naming processes from a /proc tree and a passwd file (devices/processes.hpp): a fake tree in a temporary
// folder, so that the cases (a user passwd does not list, a kernel thread, a long command line, a process
// that is gone) do not depend on this machine; and this machine's own process as the real case.
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <map>
#include <vector>

#include <gtest/gtest.h>

#include "devices/processes.hpp"
#include "support/sleeping_group.hpp"

namespace fs = std::filesystem;
using loch::devices::describe_process;
using loch::devices::largest_resident;

namespace {

struct FakeProc {
    FakeProc() : root(fs::temp_directory_path() / ("loch-proc-" + std::to_string(::getpid()))) {
        fs::remove_all(root);
        fs::create_directories(root / "proc");
        std::ofstream(root / "passwd")
            << "root:x:0:0:root:/root:/bin/bash\nalice:x:1000:1000::/home/alice:/bin/sh\n";
    }
    ~FakeProc() { fs::remove_all(root); }
    void add(int pid, const std::string& name, unsigned uid, const std::string& cmdline,
             std::uint64_t rss_pages) {
        const auto d = root / "proc" / std::to_string(pid);
        fs::create_directories(d);
        std::ofstream(d / "status") << "Name:\t" << name << "\nUid:\t" << uid << "\t" << uid << "\t" << uid
                                    << "\t" << uid << "\n";
        std::ofstream(d / "cmdline", std::ios::binary) << cmdline;
        std::ofstream(d / "statm") << rss_pages * 2 << " " << rss_pages << " 0 0 0 0 0\n";
    }
    fs::path proc() const { return root / "proc"; }
    fs::path passwd() const { return root / "passwd"; }
    fs::path root;
};

}  // namespace

TEST(Processes, NamesTheCommandLineAndTheOwnerFromPasswd) {
    FakeProc f;
    std::string cmdline;
    for (const char* a : {"python", "train.py", "--epochs", "3"}) cmdline += std::string(a) + '\0';
    f.add(4123, "python", 1000, cmdline, 100);
    const auto p = describe_process(4123, f.proc(), f.passwd());
    ASSERT_TRUE(p);
    EXPECT_EQ(p->user, "alice");
    EXPECT_EQ(p->command, "python train.py --epochs 3");
}

TEST(Processes, AnUnlistedUserIsItsUidAKernelThreadItsNameALongCommandIsCut) {
    FakeProc f;
    f.add(7, "kworker/0:1", 4242, "", 0);
    f.add(8, "java", 0, std::string(400, 'x'), 1);
    EXPECT_EQ(describe_process(7, f.proc(), f.passwd())->user, "4242");
    EXPECT_EQ(describe_process(7, f.proc(), f.passwd())->command, "[kworker/0:1]");
    EXPECT_EQ(describe_process(8, f.proc(), f.passwd())->command.size(), 160u);
    EXPECT_FALSE(describe_process(9, f.proc(), f.passwd())) << "gone";
}

TEST(Processes, LargestResidentAreListedLargestFirst) {
    FakeProc f;
    f.add(10, "a", 0, "a", 5);
    f.add(11, "b", 0, "b", 50);
    f.add(12, "c", 0, "c", 20);
    const auto top = largest_resident(2, f.proc());
    ASSERT_EQ(top.size(), 2u);
    EXPECT_EQ(top[0].first, 11);
    EXPECT_EQ(top[1].first, 12);
    EXPECT_EQ(top[0].second, 50u * static_cast<std::uint64_t>(::sysconf(_SC_PAGESIZE)));
}

TEST(Processes, ThisProcessOnThisMachine) {
    const auto p = describe_process(::getpid());
    ASSERT_TRUE(p);
    EXPECT_NE(p->command.find("test_devices"), std::string::npos) << p->command;
    EXPECT_FALSE(p->user.empty());
}

// A process group in a fake /proc: stat (pgrp is the 5th field) and each thread's children file.
struct FakeGroup : FakeProc {
    void process(int pid, int pgrp, const std::map<int, std::string>& children_by_thread,
                 const std::string& comm = "engine") {
        const auto d = proc() / std::to_string(pid);
        fs::create_directories(d);
        std::ofstream(d / "stat") << pid << " (" << comm << ") S 1 " << pgrp << " " << pgrp << " 0 -1\n";
        for (const auto& [tid, children] : children_by_thread) {
            fs::create_directories(d / "task" / std::to_string(tid));
            std::ofstream(d / "task" / std::to_string(tid) / "children") << children;
        }
    }
};

TEST(ProcessGroups, DescentFindsChildrenOfEveryThreadAndSkipsThoseThatLeftTheGroup) {
    FakeGroup f;
    f.process(10, 10, {{10, "11 12 "}, {13, "14 "}});  // the leader; thread 13 forked 14
    f.process(11, 10, {{11, "15 "}});
    f.process(12, 10, {{12, ""}});
    f.process(14, 10, {{14, ""}});
    f.process(15, 99, {{15, "16 "}}, "a (tricky) name");  // left the group (setpgid), its child came back
    f.process(16, 10, {{16, ""}});
    f.process(20, 10, {{20, ""}});  // an orphan of the group: its parent is gone, init adopted it
    f.process(30, 30, {{30, ""}});  // another group
    const auto found = loch::devices::group_by_descent(10, {}, f.proc());
    ASSERT_TRUE(found.has_value());
    EXPECT_EQ(*found, (std::vector<int>{10, 11, 12, 14, 16}));
    // The scan reads every process: it finds the orphan too, which is why the broker rescans now and then.
    EXPECT_EQ(loch::devices::group_by_scan(10, f.proc()), (std::vector<int>{10, 11, 12, 14, 16, 20}));
    // Once known (from a scan), the orphan is kept by the descent while it lives.
    EXPECT_EQ(*loch::devices::group_by_descent(10, {10, 11, 12, 14, 16, 20}, f.proc()),
              (std::vector<int>{10, 11, 12, 14, 16, 20}));
    fs::remove_all(f.proc() / "20");
    EXPECT_EQ(*loch::devices::group_by_descent(10, {10, 11, 12, 14, 16, 20}, f.proc()),
              (std::vector<int>{10, 11, 12, 14, 16}));
}

TEST(ProcessGroups, WithoutChildrenFilesTheCallerIsToldToScanAndAGoneGroupIsItsLeader) {
    FakeGroup f;
    f.process(10, 10, {});
    fs::create_directories(f.proc() / "10" / "task" / "10");  // a kernel without CONFIG_PROC_CHILDREN
    EXPECT_FALSE(loch::devices::group_by_descent(10, {}, f.proc()).has_value());
    EXPECT_EQ(*loch::devices::group_by_descent(77, {78}, f.proc()), std::vector<int>{77});
    EXPECT_EQ(loch::devices::group_by_scan(77, f.proc()), std::vector<int>{77});
}

// The real kernel: a leader, its two children and a grandchild whose parent exited (an orphan): the descent
// from the leader finds the three it can reach, the scan all four, and the descent from the scanned members
// all four again.
TEST(ProcessGroups, OnThisMachineTheDescentAgreesWithTheScanOnceTheOrphanIsKnown) {
    const loch::test::SleepingGroup group(2, 1);
    ASSERT_GT(group.leader(), 0);
    const auto scanned = loch::devices::group_by_scan(group.leader());
    const auto descended = loch::devices::group_by_descent(group.leader(), {});
    const auto again = loch::devices::group_by_descent(group.leader(), scanned);
    EXPECT_EQ(scanned.size(), 4u);
    if (!descended) GTEST_SKIP() << "this kernel has no /proc/PID/task/TID/children";
    EXPECT_EQ(descended->size(), 3u);
    EXPECT_EQ(again, scanned);
}
