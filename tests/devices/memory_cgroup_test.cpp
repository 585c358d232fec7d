// devices/memory_cgroup on captured trees: cgroup v1 inside a podman container limited to 512 MiB on this
// project's cgroup-v1 host, after an engine grew past the limit (tests/data/sysroots/cgroup-v1-podman-512m),
// and cgroup v2 for a systemd unit whose slice holds the limit (the counter is the unit's own, the limit an
// ancestor's). Also: no cgroup at all, a counter the kernel does not keep, and a malformed counter.
#include <gtest/gtest.h>

#include "core/memory.hpp"
#include "devices/memory_cgroup.hpp"
#include "sysroot_fixture.hpp"

namespace loch::devices {
namespace {

using testing::ScratchSysroot;
using testing::sysroot_fixture;

TEST(CgroupPaths, TheUnifiedPathAndAV1ControllersPathEvenInAListOfControllers) {
    const auto p = cgroup_paths("4:memory:/pod/a\n2:cpu,cpuacct:/pod/b\n1:cpuset:/\n0::/pod/c\n", "cpu");
    EXPECT_EQ(p.v2, "/pod/c");
    EXPECT_EQ(p.v1, "/pod/b");
    EXPECT_EQ(cgroup_paths("4:memory:/pod/a\n", "memory").v1, "/pod/a");
    EXPECT_EQ(cgroup_paths("2:cpuacct:/pod/b\n", "cpu").v1, "") << "cpuacct is not cpu";
    EXPECT_EQ(cgroup_paths("garbage\n", "cpu").v1, "");
}

TEST(MemoryCgroup, V1InsideAPodmanContainerReadsTheLimitTheUseAndTheOomKills) {
    const auto c = read_memory_cgroup(Sysroot(sysroot_fixture("cgroup-v1-podman-512m")));
    ASSERT_TRUE(c);
    EXPECT_EQ(c->at.version, 1);
    EXPECT_EQ(c->at.dir, "/sys/fs/cgroup/memory");
    EXPECT_EQ(c->limit, 512 * kMiB);
    EXPECT_EQ(c->limit_file, "/sys/fs/cgroup/memory/memory.limit_in_bytes");
    ASSERT_TRUE(c->current);
    EXPECT_LT(*c->current, 512 * kMiB);
    EXPECT_EQ(c->oom_kills, 1u);
    EXPECT_EQ(c->oom_kills_file, "/sys/fs/cgroup/memory/memory.oom_control");
    EXPECT_EQ(c->inactive_file, 1122304u);  // v1: total_inactive_file (the hierarchy's), not inactive_file
    EXPECT_EQ(c->working_set(), 2437120u - 1122304u);
}

TEST(MemoryCgroup, V2TakesTheTightestLimitUpToTheRootAndTheUnitsOwnCounter) {
    const auto c = read_memory_cgroup(Sysroot(sysroot_fixture("cgroup-v2-service-slice")));
    ASSERT_TRUE(c);
    EXPECT_EQ(c->at.version, 2);
    EXPECT_EQ(c->at.dir, "/sys/fs/cgroup/loch.slice/loch.service");
    EXPECT_EQ(c->at.path, "/loch.slice/loch.service");
    EXPECT_EQ(c->limit, 8 * kGiB);
    EXPECT_EQ(c->limit_file, "/sys/fs/cgroup/loch.slice/memory.max");
    EXPECT_EQ(c->current, kGiB);
    EXPECT_EQ(c->working_set(), kGiB - 256 * kMiB);  // less the inactive page cache
    EXPECT_EQ(c->oom_kills, 2u);
    EXPECT_EQ(c->oom_kills_file, "/sys/fs/cgroup/loch.slice/loch.service/memory.events");
}

TEST(MemoryCgroup, ACounterTheKernelDoesNotKeepOrCannotBeReadIsUnknownNotZero) {
    ScratchSysroot tree("cgroup-v2-service-slice");
    tree.write("/sys/fs/cgroup/loch.slice/loch.service/memory.events", "low 0\nhigh 0\nmax 0\noom 0\n");
    EXPECT_FALSE(read_memory_cgroup(Sysroot(tree.path()))->oom_kills);
    tree.write("/sys/fs/cgroup/loch.slice/loch.service/memory.events", "oom_kill lots\n");
    EXPECT_FALSE(read_memory_cgroup(Sysroot(tree.path()))->oom_kills);
    tree.remove("/sys/fs/cgroup/loch.slice/loch.service/memory.events");
    const auto c = read_memory_cgroup(Sysroot(tree.path()));
    ASSERT_TRUE(c);
    EXPECT_FALSE(c->oom_kills);
    EXPECT_EQ(c->limit, 8 * kGiB);  // the rest still reads
}

TEST(MemoryCgroup, NoLimitAndNoCgroup) {
    ScratchSysroot tree("cgroup-v2-service-slice");
    tree.write("/sys/fs/cgroup/loch.slice/memory.max", "max\n");
    const auto c = read_memory_cgroup(Sysroot(tree.path()));
    ASSERT_TRUE(c);
    EXPECT_FALSE(c->limit);
    EXPECT_EQ(c->oom_kills, 2u);
    tree.write("/proc/self/cgroup", "0::/elsewhere\n");
    EXPECT_FALSE(read_memory_cgroup(Sysroot(tree.path())));
    tree.remove("/proc/self/cgroup");
    EXPECT_FALSE(read_memory_cgroup(Sysroot(tree.path())));
}

TEST(MemoryCgroup, TheCounterIsFoundAmongTheOtherLines) {
    EXPECT_EQ(parse_oom_kill_count("oom_kill_disable 0\nunder_oom 0\noom_kill 7\n"), 7u);
    EXPECT_EQ(parse_oom_kill_count("low 0\noom_kill 12\noom_group_kill 3\n"), 12u);
    EXPECT_FALSE(parse_oom_kill_count("oom_kill_disable 1\nunder_oom 0\n"));
    EXPECT_FALSE(parse_oom_kill_count(""));
}

}  // namespace
}  // namespace loch::devices
