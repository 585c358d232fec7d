// One device vocabulary: the runtime ordinal an engine gets comes from the probe, never from the id's digits.
#include <gtest/gtest.h>

#include "broker/device_source.hpp"
#include "broker/footprint.hpp"
#include "devices/probe.hpp"
#include "engines/kinds/llama_server.hpp"

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
