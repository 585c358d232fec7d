// Naming processes from a /proc tree and a passwd file (devices/processes.hpp): a fake tree in a temporary
// folder, so that the cases (a user passwd does not list, a kernel thread, a long command line, a process
// that is gone) do not depend on this machine; and this machine's own process as the real case.
#include <unistd.h>

#include <filesystem>
#include <fstream>

#include <gtest/gtest.h>

#include "devices/processes.hpp"

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
