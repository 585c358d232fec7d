// The NVML probe against the NVML TEST DOUBLE (tests/doubles/nvml_double.cpp): what loch reads from the C
// ABI, and how it reports NVML that is absent or failing. The real libnvidia-ml is checked on the H200.
#include <gtest/gtest.h>

#include <cstdlib>

#include "devices/probe.hpp"
#include "devices/sysroot_fixture.hpp"

namespace loch::devices {
namespace {

struct Scenario {
    explicit Scenario(const char* name) { ::setenv("LOCH_NVML_DOUBLE_SCENARIO", name, 1); }
    ~Scenario() { ::unsetenv("LOCH_NVML_DOUBLE_SCENARIO"); }
};

ProbeOptions with_double() {
    ProbeOptions o;
    o.sysroot = loch::testing::sysroot_fixture("strix-halo-traps");  // has /proc/4242/cmdline
    o.nvml_library = LOCH_NVML_DOUBLE;
    return o;
}

TEST(NvmlProbe, ReadsMemoryDriverCapabilityAndProcessesFromTheCAbi) {
    Scenario s("h200");
    const auto r = probe(with_double());
    const auto* gpu = r.find("nvidia:0");
    ASSERT_NE(gpu, nullptr);
    EXPECT_EQ(gpu->name, "NVIDIA H200");
    EXPECT_EQ(gpu->kind, DeviceKind::discrete);
    EXPECT_EQ(*gpu->compute.value, "9.0");
    EXPECT_EQ(*gpu->driver_version.value, "NVIDIA 570.133.20");
    const auto* vram = gpu->pool(PoolKind::vram);
    ASSERT_NE(vram, nullptr);
    EXPECT_EQ(vram->total->bytes, 150754820096ull);
    EXPECT_EQ(vram->total->detail, "NVML nvmlDeviceGetMemoryInfo_v2(0).total");
    // v2: the driver's reservation is its own figure, not part of `used`.
    ASSERT_TRUE(vram->reserved);
    EXPECT_EQ(vram->reserved->bytes, 615 * kMiB);
    EXPECT_EQ(vram->used->bytes, 20 * kGiB - 615 * kMiB);
    EXPECT_EQ(vram->free->bytes, 150754820096ull - 20 * kGiB);
    EXPECT_EQ(gpu->usable.budget->bytes, 150754820096ull - 20 * kGiB);
    // pid 999 has NVML_VALUE_NOT_AVAILABLE: not a row with a made-up number, but said in the note.
    ASSERT_EQ(gpu->processes.size(), 1u);
    EXPECT_EQ(gpu->processes[0].pid, 4242);
    EXPECT_EQ(gpu->processes[0].bytes.bytes, 18 * kGiB);
    EXPECT_EQ(gpu->processes[0].command,
              "/opt/llama/llama-server -m /models/llama-3.3-70b-q4_k_m.gguf --port 8081");
    EXPECT_NE(gpu->processes_note.find("1 processes without a memory figure"), std::string::npos)
        << gpu->processes_note;
    // NVIDIA devices come before AMD ones and the CPU.
    EXPECT_EQ(r.devices.front().id, "nvidia:0");
    EXPECT_EQ(r.devices.back().id, "cpu");
}

TEST(NvmlProbe, GrowsTheProcessBufferWhenNvmlSaysItIsTooSmall) {
    Scenario s("many-processes");
    const auto r = probe(with_double());
    const auto* gpu = r.find("nvidia:0");
    ASSERT_NE(gpu, nullptr);
    EXPECT_EQ(gpu->processes.size(), 100u) << gpu->processes_note;
}

// A driver without nvmlDeviceGetMemoryInfo_v2: v1's figures, `used` including the reservation, said so.
TEST(NvmlProbe, WithoutV2MemoryInfoTheReservationIsInUsedAndSaidSo) {
    Scenario s("v1-only");
    const auto r = probe(with_double());
    const auto* gpu = r.find("nvidia:0");
    ASSERT_NE(gpu, nullptr);
    const auto* vram = gpu->pool(PoolKind::vram);
    ASSERT_NE(vram, nullptr);
    EXPECT_EQ(vram->used->bytes, 20 * kGiB);
    EXPECT_EQ(vram->total->detail, "NVML nvmlDeviceGetMemoryInfo(0).total");
    EXPECT_FALSE(vram->reserved);
    EXPECT_NE(vram->reserved.detail.find("counted in used"), std::string::npos);
}

TEST(NvmlProbe, FailedInitIsANoteWithNvmlsErrorNotACrash) {
    Scenario s("init-fails");
    const auto r = probe(with_double());
    EXPECT_EQ(r.find("nvidia:0"), nullptr);
    ASSERT_FALSE(r.notes.empty());
    EXPECT_NE(r.notes[0].find("nvmlInit_v2 failed: NVML error 9 (Driver Not Loaded)"), std::string::npos)
        << r.notes[0];
}

TEST(NvmlProbe, MissingLibraryIsANoteNamingIt) {
    ProbeOptions o;
    o.sysroot = loch::testing::sysroot_fixture("cpu-container-16g");
    o.nvml_library = "/nonexistent/libnvidia-ml.so.1";
    const auto r = probe(o);
    ASSERT_EQ(r.devices.size(), 1u);
    EXPECT_NE(r.notes.at(0).find("dlopen /nonexistent/libnvidia-ml.so.1 failed"), std::string::npos)
        << r.notes[0];
}

TEST(NvmlProbe, LochNvmlLibraryOverridesTheLibraryEvenOnACapturedTree) {
    const auto o = default_probe_options(loch::testing::sysroot_fixture("rx7900xtx"),
                                         Env{{"LOCH_NVML_LIBRARY", "/x/libnvml-double.so"}});
    EXPECT_EQ(o.nvml_library, "/x/libnvml-double.so");
    EXPECT_FALSE(o.probe_vulkan);
    const auto plain = default_probe_options(loch::testing::sysroot_fixture("rx7900xtx"), Env{});
    EXPECT_EQ(plain.nvml_library, "");
    const auto live = default_probe_options("/", Env{});
    EXPECT_EQ(live.nvml_library, "libnvidia-ml.so.1");
    EXPECT_TRUE(live.probe_vulkan);
}

}  // namespace
}  // namespace loch::devices
