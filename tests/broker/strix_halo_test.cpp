// The broker on the captured Strix Halo trees (ProbedDevices over tests/data/sysroots/strix-halo-*, the
// engines through the fake launcher): the transitions the story's traps go through (docs/strix-halo.md) — a
// tensor above Vulkan's largest allocation refused on arrival, the GTT ceiling's refusal with the kernel
// parameters, unified memory refused before a ROCm engine starts on the APU, a request that can never fit
// beside a cold model's weights refused before loading, and the APU's pool capped by a container's limit.
#include <gtest/gtest.h>

#include <cstdlib>

#include "broker_fixture.hpp"
#include "devices/sysroot_fixture.hpp"

namespace loch::broker {
namespace {

using namespace test_fixture;

constexpr const char* kApu = "amd:card0";

class StrixHaloBroker : public BrokerTest {
  protected:
    void start_tree(const std::string& tree, const std::string& backend) {
        config::DeviceConfig dc;
        dc.id = kApu;
        dc.backend = backend;
        cfg.devices[kApu] = dc;
        for (auto& m : cfg.models) m.devices = {kApu};
        start_on(ProbedDevices("", loch::testing::sysroot_fixture(tree)).snapshot(), fast());
    }
    // The request's refusal (it must be one, at once).
    Error refused(const std::string& model, RequestNeeds needs = {}) {
        auto r = acquire(model, std::move(needs));
        EXPECT_TRUE(settle(r, 2s));
        auto e = error_of(r);
        if (!e) throw std::runtime_error("'" + model + "' was not refused");
        return *e;
    }
    // GGML_CUDA_ENABLE_UNIFIED_MEMORY in loch's own environment (the engines inherit it) for one test.
    struct UnifiedMemoryVariable {
        explicit UnifiedMemoryVariable(const char* value) {
            ::setenv("GGML_CUDA_ENABLE_UNIFIED_MEMORY", value, 1);
        }
        ~UnifiedMemoryVariable() { ::unsetenv("GGML_CUDA_ENABLE_UNIFIED_MEMORY"); }
    };
    static RequestNeeds image(std::uint64_t compute, std::uint64_t largest_tensor) {
        engines::RequestCost c;
        c.bytes = compute;
        c.why = "compute at 1024x1024";
        c.largest_tensor = largest_tensor;
        c.largest_tensor_why =
            "decoder: the im2col of a 256-channel 3x3 convolution at full resolution (f16)";
        c.under_allocation = [](std::uint64_t) {
            return std::vector<std::string>{"direct VAE convolutions (sd.vae_conv_direct: true)"};
        };
        RequestNeeds needs;
        needs.transient = c;
        return needs;
    }
};

TEST_F(StrixHaloBroker, ATensorAboveVulkansLargestAllocationIsRefusedOnArrivalBeforeAnyEngineStarts) {
    add_model("flux2", 20 * kGiB);
    start_tree("strix-halo-stock", "vulkan");
    const auto e = refused("flux2", image(8 * kGiB, 4608ull * kMiB));
    EXPECT_EQ(e.kind(), ErrorKind::insufficient_memory);
    const std::string msg = e.what();
    EXPECT_NE(msg.find("one 4.50 GiB buffer"), std::string::npos) << msg;
    EXPECT_NE(msg.find("4.00 GiB"), std::string::npos) << msg;
    EXPECT_NE(msg.find("devices.amd:card0.backend: rocm"), std::string::npos) << msg;
    EXPECT_NE(msg.find("sd.vae_conv_direct"), std::string::npos) << msg;
    EXPECT_EQ(e.details()["largest_allocation_bytes"], 4294967292u);
    EXPECT_TRUE(fake->runs.empty()) << "refused before the engine started";
    // Under the limit it is served, and the Vulkan heap (80 GiB: 2/3 of carve-out + GTT on RADV) — not the
    // 24 GiB GTT pool a ROCm engine would see — is the device's total for this build.
    auto small = acquire("flux2", image(2 * kGiB, 1152ull * kMiB));
    ASSERT_TRUE(settle(small));
    ASSERT_EQ(fake->runs.size(), 1u);
    EXPECT_TRUE(small.get().valid());
}

TEST_F(StrixHaloBroker, AModelAboveTheApusGttCeilingIsRefusedWithTheCarveOutAndTheKernelParameters) {
    add_model("flux2", 57 * kGiB);
    start_tree("strix-halo-stock", "rocm");
    const auto e = refused("flux2");
    EXPECT_EQ(e.kind(), ErrorKind::insufficient_memory);
    const std::string msg = e.what();
    EXPECT_NE(msg.find("96.00 GiB BIOS carve-out"), std::string::npos) << msg;
    EXPECT_NE(msg.find("amd_iommu=off amdgpu.gttsize=126976 ttm.pages_limit=32505856"), std::string::npos)
        << msg;
    EXPECT_TRUE(fake->runs.empty());
}

TEST_F(StrixHaloBroker, UnifiedMemoryInLochsEnvironmentRefusesARocmEngineOnTheApuButNotAVulkanOne) {
    const UnifiedMemoryVariable set("0");  // any value turns it on in ggml
    add_model("flux2", 20 * kGiB);
    start_tree("strix-halo-tuned", "rocm");
    const auto e = refused("flux2");
    EXPECT_EQ(e.kind(), ErrorKind::engine_failed);
    const std::string msg = e.what();
    EXPECT_NE(msg.find("hipMemAdviseSetCoarseGrain"), std::string::npos) << msg;
    EXPECT_NE(msg.find("GGML_CUDA_ENABLE_UNIFIED_MEMORY=\"0\""), std::string::npos) << msg;
    EXPECT_TRUE(fake->runs.empty());
}

TEST_F(StrixHaloBroker, UnderTheVulkanBuildTheVariableIsNeverReadAndTheEngineStarts) {
    const UnifiedMemoryVariable set("1");
    add_model("flux2", 20 * kGiB);
    start_tree("strix-halo-tuned", "vulkan");
    auto r = acquire("flux2");
    run_for(100ms);
    ASSERT_EQ(fake->runs.size(), 1u);
}

TEST_F(StrixHaloBroker, ARequestThatCanNeverFitBesideAColdModelsWeightsIsRefusedBeforeLoading) {
    add_model("flux2", 115 * kGiB);
    start_tree("strix-halo-tuned", "rocm");  // GTT 124 GiB
    const auto e = refused("flux2", image(12 * kGiB, 1 * kGiB));
    EXPECT_EQ(e.kind(), ErrorKind::insufficient_memory);
    EXPECT_NE(std::string(e.what()).find("does not fit beside its weights"), std::string::npos) << e.what();
    EXPECT_TRUE(fake->runs.empty());
}

// The traps tree runs in a container limited to 64 GiB: the APU's GTT pool (124 GiB) is capped to it, as the
// CPU is, and the refusal names the limit's file.
TEST_F(StrixHaloBroker, AContainersLimitCapsTheApuAndIsNamedInTheRefusal) {
    const auto snap = ProbedDevices("", loch::testing::sysroot_fixture("strix-halo-traps")).snapshot();
    const auto apu = std::find_if(snap.begin(), snap.end(), [](const auto& d) { return d.id == kApu; });
    ASSERT_NE(apu, snap.end());
    EXPECT_TRUE(apu->unified);
    EXPECT_EQ(apu->total.bytes, 64 * kGiB);
    EXPECT_NE(apu->total.detail.find("the memory cgroup's limit"), std::string::npos) << apu->total.detail;
    add_model("flux2", 57 * kGiB);
    start_tree("strix-halo-traps", "rocm");
    const auto e = refused("flux2", image(8 * kGiB, 1 * kGiB));
    EXPECT_NE(std::string(e.what()).find("memory cgroup's limit (/sys/fs/cgroup/memory.max)"),
              std::string::npos)
        << e.what();
    EXPECT_TRUE(fake->runs.empty());
}

}  // namespace
}  // namespace loch::broker
