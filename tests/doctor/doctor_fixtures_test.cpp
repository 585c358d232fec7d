// Each sysroot fixture → the doctor findings it must produce; every check has a case that trips it and one
// that does not.
#include <gtest/gtest.h>

#include <algorithm>

#include <nlohmann/json.hpp>

#include "devices/probe.hpp"
#include "devices/sysroot_fixture.hpp"
#include "doctor/doctor.hpp"
#include "finding_lookup.hpp"

namespace loch::doctor {
namespace {

using devices::DeviceReport;
using loch::testing::ScratchSysroot;
using loch::testing::sysroot_fixture;

DeviceReport report_of(const std::filesystem::path& root, std::optional<devices::Env> env = std::nullopt) {
    devices::ProbeOptions o;
    o.sysroot = root;
    o.env = std::move(env);
    return devices::probe(o);
}

DeviceReport fixture_report(std::string_view fixture) {
    return report_of(sysroot_fixture(fixture));
}

std::vector<std::string> ids(const std::vector<Finding>& fs) {
    std::vector<std::string> v;
    for (const auto& f : fs) v.push_back(f.id);
    std::sort(v.begin(), v.end());
    return v;
}

bool mentions(const Finding& f, std::string_view text) {
    if (f.explanation.find(text) != std::string::npos || f.fix.find(text) != std::string::npos) return true;
    for (const auto& e : f.evidence)
        if (e.what.find(text) != std::string::npos || e.value.find(text) != std::string::npos ||
            e.from.find(text) != std::string::npos)
            return true;
    return false;
}

ModelDemand model(std::string name, std::uint64_t bytes) {
    return {std::move(name), {bytes, Source::formula, "test"}};
}

using Ids = std::vector<std::string>;

// ---- whole fixtures -------------------------------------------------------------------------------------

TEST(DoctorFixtures, StrixHaloStockWarnsThatGttNotTheCarveOutIsTheCeiling) {
    const auto fs = diagnose(fixture_report("strix-halo-stock"), {});
    EXPECT_EQ(ids(fs), (Ids{"apu-gtt-ceiling", "hsa-override-gfx"}));
    const auto* f = find(fs, "apu-gtt-ceiling");
    ASSERT_NE(f, nullptr);
    EXPECT_EQ(f->severity, Severity::warning);
    EXPECT_EQ(f->device, "amd:card0");
    EXPECT_TRUE(mentions(*f, "sysfs card0/device/mem_info_gtt_total"));
    EXPECT_TRUE(mentions(*f, "96.00 GiB"));
    // 31.3 GiB seen by the OS + 96 GiB carve-out = 128 GiB machine → 124 GiB of GTT.
    EXPECT_NE(f->fix.find("amd_iommu=off amdgpu.gttsize=126976 ttm.pages_limit=32505856"), std::string::npos)
        << f->fix;
    EXPECT_NE(f->explanation.find("IOMMU on"), std::string::npos);
}

TEST(DoctorFixtures, StrixHaloTunedOnlyMentionsTheGfxOverride) {
    const auto fs = diagnose(fixture_report("strix-halo-tuned"), {});
    EXPECT_EQ(ids(fs), (Ids{"hsa-override-gfx"}));
    EXPECT_EQ(fs[0].severity, Severity::info);
    EXPECT_NE(fs[0].fix.find("HSA_OVERRIDE_GFX_VERSION=11.0.0"), std::string::npos);
    EXPECT_NE(fs[0].explanation.find("gfx1100"), std::string::npos);
    EXPECT_FALSE(has_errors(fs));
}

TEST(DoctorFixtures, Rx7900XtxIsClean) {
    EXPECT_EQ(ids(diagnose(fixture_report("rx7900xtx"), {})), Ids{});
}

TEST(DoctorFixtures, CpuContainerReportsItsLimit) {
    const auto fs = diagnose(fixture_report("cpu-container-16g"), {});
    EXPECT_EQ(ids(fs), (Ids{"container-memory-limit"}));
    EXPECT_TRUE(mentions(fs[0], "/sys/fs/cgroup/memory.max"));
    EXPECT_TRUE(mentions(fs[0], "16.00 GiB (17179869184 B)"));
}

TEST(DoctorFixtures, TrapsTreeTripsEveryEnvironmentAndPlatformTrap) {
    const auto fs = diagnose(fixture_report("strix-halo-traps"), {});
    EXPECT_EQ(ids(fs), (Ids{"container-memory-limit", "linux-firmware-broken", "max-map-count",
                            "outside-gpu-process", "unified-memory-env"}));
    EXPECT_TRUE(has_errors(fs));
    EXPECT_EQ(fs.front().severity, Severity::error);  // errors first

    const auto* um = find(fs, "unified-memory-env");
    EXPECT_EQ(um->severity, Severity::error);
    EXPECT_TRUE(mentions(*um, "SIGSEGV"));
    EXPECT_TRUE(mentions(*um, "gfx1100"));  // HSA_OVERRIDE_GFX_VERSION=11.0.0 is in the evidence
    EXPECT_TRUE(mentions(*um, "cgroup memory limit"));
    EXPECT_NE(um->fix.find("Remove GGML_CUDA_ENABLE_UNIFIED_MEMORY"), std::string::npos);

    const auto* fw = find(fs, "linux-firmware-broken");
    EXPECT_EQ(fw->severity, Severity::error);
    EXPECT_TRUE(mentions(*fw, "/var/lib/pacman/local/linux-firmware-20251125.b3c4d5e6-1"));
    EXPECT_NE(fw->fix.find("20260110"), std::string::npos);

    const auto* mm = find(fs, "max-map-count");
    EXPECT_EQ(mm->severity, Severity::warning);
    EXPECT_TRUE(mentions(*mm, "65530"));

    const auto* p = find(fs, "outside-gpu-process");
    EXPECT_EQ(p->severity, Severity::warning);
    EXPECT_NE(
        p->explanation.find("PID 4242 (/opt/llama/llama-server -m /models/llama-3.3-70b-q4_k_m.gguf --port "
                            "8081) holds 40.00 GiB"),
        std::string::npos)
        << p->explanation;
    EXPECT_NE(p->fix.find("kill 4242"), std::string::npos);
}

TEST(DoctorFixtures, CorruptTreeSaysWhichBudgetsAreUnknown) {
    const auto fs = diagnose(fixture_report("corrupt"), {});
    EXPECT_EQ(ids(fs), (Ids{"budget-unknown", "budget-unknown"}));
}

// ---- check by check ------------------------------------------------------------------------------------

TEST(UnifiedMemoryEnv, EvenZeroEnablesItSoItIsStillAnErrorOnAnApu) {
    const auto fs = diagnose(report_of(sysroot_fixture("strix-halo-tuned"),
                                       devices::Env{{"GGML_CUDA_ENABLE_UNIFIED_MEMORY", "0"}}),
                             {});
    ASSERT_NE(find(fs, "unified-memory-env"), nullptr);
    EXPECT_EQ(find(fs, "unified-memory-env")->severity, Severity::error);
}

TEST(UnifiedMemoryEnv, OnADiscreteGpuWithoutContainerLimitItIsFine) {
    const auto fs = diagnose(
        report_of(sysroot_fixture("rx7900xtx"), devices::Env{{"GGML_CUDA_ENABLE_UNIFIED_MEMORY", "1"}}), {});
    EXPECT_EQ(find(fs, "unified-memory-env"), nullptr);
}

TEST(UnifiedMemoryEnv, OnADiscreteGpuInAContainerItWarnsAboutCgroupCharging) {
    ScratchSysroot tree("rx7900xtx");
    tree.write("/sys/fs/cgroup/user.slice/user-1000.slice/session-2.scope/memory.max", "34359738368\n");
    const auto fs =
        diagnose(report_of(tree.path(), devices::Env{{"GGML_CUDA_ENABLE_UNIFIED_MEMORY", "1"}}), {});
    const auto* f = find(fs, "unified-memory-env");
    ASSERT_NE(f, nullptr);
    EXPECT_EQ(f->severity, Severity::warning);
    EXPECT_TRUE(mentions(*f, "32.00 GiB"));
}

TEST(LinuxFirmware, FixedVersionDoesNotTrip) {
    ScratchSysroot tree("strix-halo-traps");
    tree.remove("/var/lib/pacman/local/linux-firmware-20251125.b3c4d5e6-1");
    tree.write("/var/lib/pacman/local/linux-firmware-20260110.0a0a0a0a-1/desc", "%NAME%\nlinux-firmware\n");
    EXPECT_EQ(find(diagnose(report_of(tree.path()), {}), "linux-firmware-broken"), nullptr);
}

TEST(LinuxFirmware, BrokenVersionOnADiscreteGpuDoesNotTrip) {
    ScratchSysroot tree("rx7900xtx");
    tree.write("/var/lib/dpkg/status", "Package: linux-firmware\nVersion: 20251125.git1-0ubuntu1\n\n");
    EXPECT_EQ(find(diagnose(report_of(tree.path()), {}), "linux-firmware-broken"), nullptr);
}

TEST(LinuxFirmware, UnknownVersionOnStrixHaloIsInfo) {
    ScratchSysroot tree("strix-halo-tuned");
    tree.remove("/var/lib/dpkg/status");
    const auto fs = diagnose(report_of(tree.path()), {});
    const auto* f = find(fs, "linux-firmware-broken");
    ASSERT_NE(f, nullptr);
    EXPECT_EQ(f->severity, Severity::info);
}

TEST(HsaOverride, SetOverrideOrNativelySupportedTargetDoesNotTrip) {
    EXPECT_EQ(find(diagnose(report_of(sysroot_fixture("strix-halo-tuned"),
                                      devices::Env{{"HSA_OVERRIDE_GFX_VERSION", "11.0.0"}}),
                            {}),
                   "hsa-override-gfx"),
              nullptr);
    EXPECT_EQ(find(diagnose(fixture_report("rx7900xtx"), {}), "hsa-override-gfx"), nullptr);  // gfx1100
}

TEST(MaxMapCount, HighEnoughDoesNotTripAndSmallModelsMakeItInfo) {
    ScratchSysroot tree("strix-halo-traps");
    const auto small = diagnose(report_of(tree.path()), Input{{model("qwen3-8b", 5 * kGiB)}, {}, {}});
    EXPECT_EQ(find(small, "max-map-count")->severity, Severity::info);
    const auto big = diagnose(report_of(tree.path()), Input{{model("llama-70b", 40 * kGiB)}, {}, {}});
    EXPECT_EQ(find(big, "max-map-count")->severity, Severity::warning);
    tree.write("/proc/sys/vm/max_map_count", "1048576\n");
    EXPECT_EQ(find(diagnose(report_of(tree.path()), {}), "max-map-count"), nullptr);
}

TEST(OutsideGpuProcess, ProcessesLochStartedAreNotReported) {
    Input in;
    in.own_pids = {4242};
    EXPECT_EQ(find(diagnose(fixture_report("strix-halo-traps"), in), "outside-gpu-process"), nullptr);
}

TEST(OutsideGpuProcess, TinyHoldersLikeACompositorAreIgnored) {
    ScratchSysroot tree("strix-halo-tuned");
    tree.write("/proc/1500/cmdline", std::string("/usr/bin/gnome-shell\0", 21));
    tree.write(
        "/proc/1500/fdinfo/9",
        "drm-driver:\tamdgpu\ndrm-client-id:\t7\ndrm-pdev:\t0000:c5:00.0\ndrm-memory-vram:\t16384 KiB\n"
        "drm-memory-gtt:\t8192 KiB\n");
    const auto r = report_of(tree.path());
    ASSERT_EQ(r.devices[0].processes.size(), 2u);                      // probed...
    EXPECT_EQ(find(diagnose(r, {}), "outside-gpu-process"), nullptr);  // ...but 24 MiB is not worth a finding
}

TEST(ContainerLimit, NoLimitOrALimitAboveRamDoesNotTrip) {
    EXPECT_EQ(find(diagnose(fixture_report("strix-halo-tuned"), {}), "container-memory-limit"), nullptr);
    ScratchSysroot tree("cpu-container-16g");
    tree.write("/sys/fs/cgroup/memory.max", "max\n");
    EXPECT_EQ(find(diagnose(report_of(tree.path()), {}), "container-memory-limit"), nullptr);
}

TEST(ContainerLimit, ALimitBelowTheLargestModelsPlanIsNamedWithBothFigures) {
    const auto fs = diagnose(fixture_report("cgroup-v1-podman-512m"),
                             Input{{model("small", 100 * kMiB), model("qwen", 700 * kMiB)}, {}, {}});
    const auto* f = find(fs, "memory-limit-below-model");
    ASSERT_NE(f, nullptr);
    EXPECT_EQ(f->severity, Severity::warning);
    EXPECT_TRUE(mentions(*f, "model qwen"));
    EXPECT_NE(f->explanation.find("limited to 512.0 MiB, less than qwen needs (700.0 MiB)"),
              std::string::npos)
        << f->explanation;
    // Below the limit, or no limit at all: nothing to say.
    EXPECT_EQ(
        find(diagnose(fixture_report("cgroup-v1-podman-512m"), Input{{model("small", 100 * kMiB)}, {}, {}}),
             "memory-limit-below-model"),
        nullptr);
    EXPECT_EQ(find(diagnose(fixture_report("strix-halo-tuned"), Input{{model("m", 700 * kMiB)}, {}, {}}),
                   "memory-limit-below-model"),
              nullptr);
}

TEST(ContainerLimit, ADiscreteGpuThatHoldsTheModelKeepsItOutOfTheLimit) {
    ScratchSysroot tree("rx7900xtx");
    tree.write("/proc/self/cgroup", "0::/\n");
    tree.write("/sys/fs/cgroup/memory.max", "8589934592\n");
    tree.write("/sys/fs/cgroup/memory.current", "1073741824\n");
    const auto r = report_of(tree.path());
    ASSERT_TRUE(r.system.cgroup_limited());
    EXPECT_EQ(find(diagnose(r, Input{{model("m", 12 * kGiB)}, {}, {}}), "memory-limit-below-model"), nullptr);
    // Larger than the GPU too: it would run from RAM, under the limit.
    EXPECT_NE(find(diagnose(r, Input{{model("m", 30 * kGiB)}, {}, {}}), "memory-limit-below-model"), nullptr);
}

TEST(ModelFit, A40GiBModelFailsOnStockStrixHaloAndFitsOnTheTunedOne) {
    const Input in{{model("llama-3.3-70b-q4_k_m", 40 * kGiB)}, {}, {}};
    const auto stock = diagnose(fixture_report("strix-halo-stock"), in);
    const auto* f = find(stock, "model-does-not-fit");
    ASSERT_NE(f, nullptr);
    EXPECT_EQ(f->severity, Severity::error);
    EXPECT_TRUE(mentions(*f, "usable on amd:card0"));
    EXPECT_TRUE(mentions(*f, "GTT headroom"));
    EXPECT_EQ(find(diagnose(fixture_report("strix-halo-tuned"), in), "model-does-not-fit"), nullptr);
}

TEST(ModelFit, ContainerLimitIsTheBudgetOnTheCpu) {
    EXPECT_EQ(find(diagnose(fixture_report("cpu-container-16g"), Input{{model("m", 20 * kGiB)}, {}, {}}),
                   "model-does-not-fit")
                  ->severity,
              Severity::error);
    EXPECT_EQ(find(diagnose(fixture_report("cpu-container-16g"), Input{{model("m", 10 * kGiB)}, {}, {}}),
                   "model-does-not-fit"),
              nullptr);
}

TEST(ModelFit, TooBigForTheGpuButNotForRamIsAWarning) {
    const auto fs = diagnose(fixture_report("rx7900xtx"), Input{{model("m", 30 * kGiB)}, {}, {}});
    ASSERT_NE(find(fs, "model-does-not-fit"), nullptr);
    EXPECT_EQ(find(fs, "model-does-not-fit")->severity, Severity::warning);
}

// The heap alone (a tree's vulkan.json also says how large one buffer may be: that is its own finding).
DeviceReport with_vulkan_heap(std::string_view fixture, std::optional<std::uint64_t> heap) {
    auto r = fixture_report(fixture);
    r.devices[0].vulkan_device_local_heap = devices::ProbedFigure::unknown("Vulkan not probed");
    r.devices[0].vulkan_max_allocation = devices::ProbedFigure::unknown("Vulkan not probed");
    if (heap)
        r.devices[0].vulkan_device_local_heap =
            devices::ProbedFigure::known({*heap, Source::measured, "Vulkan RADV heap"}, "Vulkan RADV heap");
    return r;
}

TEST(VulkanHeap, ModelLargerThanTheHeapOfAnApuIsAnError) {
    const Input in{{model("sdxl", 8 * kGiB)}, {"vulkan"}, {}};
    const auto fs = diagnose(with_vulkan_heap("strix-halo-tuned", 4 * kGiB), in);
    const auto* f = find(fs, "vulkan-heap-too-small");
    ASSERT_NE(f, nullptr);
    EXPECT_EQ(f->severity, Severity::error);
    EXPECT_TRUE(mentions(*f, "Vulkan RADV heap"));
}

TEST(VulkanHeap, SmallHeapWithoutModelsWarnsAndUnknownHeapIsInfo) {
    EXPECT_EQ(find(diagnose(with_vulkan_heap("strix-halo-tuned", 4 * kGiB), Input{{}, {"vulkan"}, {}}),
                   "vulkan-heap-too-small")
                  ->severity,
              Severity::warning);
    EXPECT_EQ(find(diagnose(with_vulkan_heap("strix-halo-tuned", std::nullopt), Input{{}, {"vulkan"}, {}}),
                   "vulkan-heap-too-small")
                  ->severity,
              Severity::info);
}

// The captured RADV figures (vulkan.json): an 83 GiB heap, but 4 GiB at most in one buffer.
TEST(VulkanHeap, ALargeHeapWithAFourGibLargestAllocationWarnsAboutImages) {
    const auto findings = diagnose(fixture_report("strix-halo-tuned"), Input{{}, {"vulkan"}, {}});
    const auto* f = find(findings, "vulkan-heap-too-small");
    ASSERT_NE(f, nullptr);
    EXPECT_EQ(f->severity, Severity::warning);
    EXPECT_NE(f->explanation.find("4.00 GiB in one buffer"), std::string::npos) << f->explanation;
    EXPECT_TRUE(mentions(*f, "vulkan.json"));
    // Without a Vulkan engine configured, nothing.
    EXPECT_EQ(
        find(diagnose(fixture_report("strix-halo-tuned"), Input{{}, {"rocm"}, {}}), "vulkan-heap-too-small"),
        nullptr);
}

TEST(VulkanHeap, NoVulkanEngineOrABigEnoughHeapOrADiscreteGpuDoesNotTrip) {
    EXPECT_EQ(find(diagnose(with_vulkan_heap("strix-halo-tuned", 4 * kGiB),
                            Input{{model("sdxl", 8 * kGiB)}, {"rocm"}, {}}),
                   "vulkan-heap-too-small"),
              nullptr);
    EXPECT_EQ(find(diagnose(with_vulkan_heap("strix-halo-tuned", 100 * kGiB),
                            Input{{model("sdxl", 8 * kGiB)}, {"vulkan"}, {}}),
                   "vulkan-heap-too-small"),
              nullptr);
    EXPECT_EQ(find(diagnose(with_vulkan_heap("rx7900xtx", 4 * kGiB),
                            Input{{model("sdxl", 8 * kGiB)}, {"vulkan"}, {}}),
                   "vulkan-heap-too-small"),
              nullptr);
}

TEST(ApuGttCeiling, TtmPagesLimitBelowGttIsTheCeiling) {
    ScratchSysroot tree("strix-halo-tuned");
    tree.write("/sys/module/ttm/parameters/pages_limit", "65536\n");  // 256 MiB < 512 MiB carve-out
    const auto r = report_of(tree.path());
    const auto fs = diagnose(r, {});
    const auto* f = find(fs, "apu-gtt-ceiling");
    ASSERT_NE(f, nullptr);
    EXPECT_NE(f->explanation.find("ttm.pages_limit"), std::string::npos);
    EXPECT_EQ(r.devices[0].usable.budget->bytes, 0u);  // 1 GiB of GTT already used > the 256 MiB ceiling
}

TEST(Json, FindingCarriesIdSeverityEvidenceSourcesAndFix) {
    const auto fs = diagnose(fixture_report("cpu-container-16g"), {});
    const auto j = to_json(fs);
    ASSERT_EQ(j.size(), 1u);
    EXPECT_EQ(j[0]["id"], "container-memory-limit");
    EXPECT_EQ(j[0]["severity"], "warning");
    EXPECT_EQ(j[0]["evidence"][0]["from"], "/sys/fs/cgroup/memory.max");
    EXPECT_EQ(j[0]["evidence"][0]["bytes"], 16 * kGiB);
    EXPECT_FALSE(j[0]["fix"].get<std::string>().empty());
    EXPECT_EQ(all_checks().size(), 13u);
}

// `loch doctor -c`: a configured limit no device can keep (cli/config_limits asks the model's kind) is a
// warning that names the model, where it was checked and the kind's lines with the largest value that fits.
TEST(LimitNeverFits, AConfiguredLimitNoDeviceKeepsIsAWarningWithTheKindsLines) {
    Input in;
    in.limits.push_back({"flux",
                         {"max_size 2048x2048 needs 84.1 GiB; at most 1408x1408 fits"},
                         "nvidia:0 (72.00 GiB can ever be free)"});
    const auto fs = diagnose(fixture_report("cpu-container-16g"), in);
    const auto it =
        std::find_if(fs.begin(), fs.end(), [](const Finding& f) { return f.id == "limit-never-fits"; });
    ASSERT_NE(it, fs.end());
    EXPECT_EQ(it->severity, Severity::warning);
    EXPECT_NE(it->explanation.find("'flux'"), std::string::npos);
    ASSERT_EQ(it->evidence.size(), 2u);
    EXPECT_NE(it->evidence[0].value.find("nvidia:0"), std::string::npos);
    EXPECT_NE(it->evidence[1].value.find("1408x1408"), std::string::npos);
    // Without a config nothing is said.
    const auto none = diagnose(fixture_report("cpu-container-16g"), {});
    EXPECT_TRUE(
        std::none_of(none.begin(), none.end(), [](const Finding& f) { return f.id == "limit-never-fits"; }));
}

}  // namespace
}  // namespace loch::doctor
