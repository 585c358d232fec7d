// devices/cpu_quota on scratch trees: a pod's CPU limit under cgroup v2 (the tightest up the tree), none
// ("max"), and cgroup v1's cfs quota inside a podman container.
#include <gtest/gtest.h>

#include "devices/cpu_quota.hpp"
#include "sysroot_fixture.hpp"

namespace loch::devices {
namespace {

using testing::ScratchSysroot;

TEST(CpuQuota, V2TakesTheTightestQuotaUpToTheRootAndMaxIsNone) {
    ScratchSysroot tree("cgroup-v2-service-slice");
    EXPECT_FALSE(cpu_quota(Sysroot(tree.path()))) << "no cpu.max anywhere: no quota";
    tree.write("/sys/fs/cgroup/loch.slice/loch.service/cpu.max", "max 100000\n");
    EXPECT_FALSE(cpu_quota(Sysroot(tree.path())));
    tree.write("/sys/fs/cgroup/loch.slice/cpu.max", "250000 100000\n");
    EXPECT_DOUBLE_EQ(*cpu_quota(Sysroot(tree.path())), 2.5);
    tree.write("/sys/fs/cgroup/loch.slice/loch.service/cpu.max", "400000 100000\n");
    EXPECT_DOUBLE_EQ(*cpu_quota(Sysroot(tree.path())), 2.5) << "the slice's is tighter";
    tree.write("/sys/fs/cgroup/loch.slice/loch.service/cpu.max", "100000 100000\n");
    EXPECT_DOUBLE_EQ(*cpu_quota(Sysroot(tree.path())), 1.0);
    tree.write("/sys/fs/cgroup/loch.slice/loch.service/cpu.max", "garbage\n");
    EXPECT_DOUBLE_EQ(*cpu_quota(Sysroot(tree.path())), 2.5) << "a malformed file is no quota, not zero";
}

TEST(CpuQuota, V1ReadsTheCpuControllersCfsQuota) {
    ScratchSysroot tree("cgroup-v1-podman-512m");
    EXPECT_FALSE(cpu_quota(Sysroot(tree.path())));
    tree.write("/sys/fs/cgroup/cpu,cpuacct/cpu.cfs_quota_us", "-1\n");
    tree.write("/sys/fs/cgroup/cpu,cpuacct/cpu.cfs_period_us", "100000\n");
    EXPECT_FALSE(cpu_quota(Sysroot(tree.path()))) << "-1: no quota";
    tree.write("/sys/fs/cgroup/cpu,cpuacct/cpu.cfs_quota_us", "300000\n");
    EXPECT_DOUBLE_EQ(*cpu_quota(Sysroot(tree.path())), 3.0);
}

TEST(CpuQuota, WithoutACgroupFileThereIsNoQuota) {
    ScratchSysroot tree("corrupt");
    EXPECT_FALSE(cpu_quota(Sysroot(tree.path())));
}

}  // namespace
}  // namespace loch::devices
