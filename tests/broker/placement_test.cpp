// One device vocabulary: the runtime ordinal an engine gets comes from the probe, never from the id's digits.
#include <gtest/gtest.h>

#include <algorithm>

#include "broker/device_source.hpp"
#include "broker/footprint.hpp"
#include "devices/probe.hpp"
#include "engines/kinds/llama_server.hpp"
#include "support/sleeping_group.hpp"

namespace loch::broker {
namespace {

TEST(Placement, TheOnlyGpuOfTheRx7900FixtureIsHipDeviceZeroThoughItIsCard1) {
    const auto found =
        devices::probe_amd(devices::Sysroot(std::string(LOCH_TEST_DATA_DIR) + "/sysroots/rx7900xtx"));
    ASSERT_EQ(found.size(), 1u);
    EXPECT_EQ(found[0].id, "amd:card1");
    const auto snap = snapshot_of(found[0]);
    ASSERT_TRUE(snap);
    EXPECT_EQ(snap->backend, "rocm");
    ASSERT_TRUE(snap->ordinal);
    EXPECT_EQ(*snap->ordinal, 0);
    const engines::Placement where{snap->id, snap->backend, snap->ordinal};
    EXPECT_EQ(engines::llama_device(where), "ROCm0");
}

TEST(Placement, WithoutAProbeOnlyIdsThatAreOrdinalsGiveOne) {
    EXPECT_EQ(placement_without_probe("cpu").backend, "cpu");
    const auto nv = placement_without_probe("nvidia:2");
    EXPECT_EQ(nv.backend, "cuda");
    EXPECT_EQ(nv.ordinal, 2);
    EXPECT_EQ(placement_without_probe("cuda1").ordinal, 1);
    EXPECT_EQ(placement_without_probe("rocm1").backend, "rocm");
    const auto amd = placement_without_probe("amd:card1");
    EXPECT_EQ(amd.backend, "rocm");
    EXPECT_FALSE(amd.ordinal);  // a DRM card number is not a HIP ordinal
}

}  // namespace
}  // namespace loch::broker

namespace loch::broker {
namespace {

TEST(ProbedDevices, GroupMembersAreEveryProcessOfTheGroup) {
    // A leader in its own group with two children, like a server and its workers.
    const test::SleepingGroup group(2);
    ASSERT_GT(group.leader(), 0);
    ProbedDevices probe;
    const std::vector<int> members = probe.group_members(group.leader());
    EXPECT_EQ(members.size(), 3u);
    EXPECT_NE(std::find(members.begin(), members.end(), group.leader()), members.end());
    // Asked again (a find by descent from the members known, or as found): the same.
    EXPECT_EQ(probe.group_members(group.leader()), members);
}

}  // namespace
}  // namespace loch::broker
