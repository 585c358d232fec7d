// Each committed sysroot fixture → the devices and figures loch must read from it.
#include <gtest/gtest.h>

#include "devices/probe.hpp"
#include "devices/sysroot_fixture.hpp"
#include "devices/usable.hpp"

namespace loch::devices {
namespace {

using loch::testing::sysroot_fixture;

DeviceReport probe_fixture(std::string_view name) {
    ProbeOptions o;
    o.sysroot = sysroot_fixture(name);
    return probe(o);
}

std::uint64_t bytes(const ProbedFigure& f) {
    EXPECT_TRUE(f.ok()) << f.detail;
    return f ? f->bytes : 0;
}

TEST(ProbeFixtures, StrixHaloStockIsAnApuWithTheCarveOutAsVramAndA24GiBGtt) {
    const auto r = probe_fixture("strix-halo-stock");
    ASSERT_EQ(r.devices.size(), 2u);  // the GPU, then the CPU; card0-eDP-1 is a connector, not a card
    const auto& gpu = r.devices[0];
    EXPECT_EQ(gpu.id, "amd:card0");
    EXPECT_EQ(gpu.vendor, Vendor::amd);
    EXPECT_EQ(gpu.kind, DeviceKind::integrated);
    EXPECT_EQ(gpu.name, "AMD Radeon 8060S (Strix Halo)");
    EXPECT_EQ(gpu.pci_slot, "0000:c5:00.0");
    ASSERT_TRUE(gpu.compute.ok()) << gpu.compute.detail;
    EXPECT_EQ(*gpu.compute.value, "gfx1151");
    EXPECT_EQ(bytes(gpu.pool(PoolKind::vram)->total), 96 * kGiB);
    EXPECT_EQ(gpu.pool(PoolKind::vram)->total->detail, "sysfs card0/device/mem_info_vram_total");
    EXPECT_EQ(gpu.pool(PoolKind::vram)->total->source, Source::measured);
    EXPECT_EQ(bytes(gpu.pool(PoolKind::gtt)->total), 24 * kGiB);
    EXPECT_EQ(bytes(gpu.pool(PoolKind::gtt)->used), 512 * kMiB);
    EXPECT_EQ(bytes(gpu.pool(PoolKind::gtt)->free), 24 * kGiB - 512 * kMiB);
    EXPECT_EQ(*gpu.firmware_version.value, "VBIOS 113-STRXLGEN-001");
    // The usable budget is the GTT headroom, not the 96 GiB carve-out.
    EXPECT_EQ(bytes(gpu.usable.budget), 24 * kGiB - 512 * kMiB);
    EXPECT_EQ(gpu.usable.binding, "GTT headroom");

    EXPECT_EQ(r.devices[1].id, "cpu");
    EXPECT_EQ(r.devices[1].name, "AMD RYZEN AI MAX+ 395 w/ Radeon 8060S");
    EXPECT_EQ(bytes(r.system.mem_total), 32812260ull * 1024);
    EXPECT_EQ(bytes(r.system.mem_available), 29360128ull * 1024);
    ASSERT_TRUE(r.system.iommu_enabled.ok());
    EXPECT_TRUE(*r.system.iommu_enabled.value);
    EXPECT_EQ(*r.system.ttm_pages_limit.value, 24 * kGiB / 4096);
    EXPECT_EQ(*r.system.amdgpu_gttsize_mib.value, -1);
    EXPECT_EQ(*r.system.linux_firmware.value, "20260110");
    EXPECT_FALSE(r.system.cgroup_limited()) << r.system.cgroup_max.detail;
    EXPECT_EQ(*r.system.cgroup.value, "/user.slice/user-1000.slice/session-2.scope");
}

TEST(ProbeFixtures, StrixHaloTunedHas124GiBGttAndTheBudgetIsMemAvailable) {
    const auto r = probe_fixture("strix-halo-tuned");
    ASSERT_EQ(r.devices.size(), 2u);
    const auto& gpu = r.devices[0];
    EXPECT_EQ(gpu.kind, DeviceKind::integrated);
    EXPECT_EQ(bytes(gpu.pool(PoolKind::vram)->total), 512 * kMiB);
    EXPECT_EQ(bytes(gpu.pool(PoolKind::gtt)->total), 124 * kGiB);
    EXPECT_FALSE(*r.system.iommu_enabled.value);
    EXPECT_EQ(r.system.iommu_enabled.detail, "/proc/cmdline: amd_iommu=off");
    EXPECT_EQ(*r.system.amdgpu_gttsize_mib.value, 126976);
    EXPECT_EQ(*r.system.ttm_pages_limit.value, 32505856u);
    // GTT headroom 123 GiB > MemAvailable 119 GiB: RAM the OS has free binds.
    EXPECT_EQ(gpu.usable.binding, "MemAvailable");
    EXPECT_EQ(bytes(gpu.usable.budget), 124780544ull * 1024);
    ASSERT_EQ(gpu.usable.terms.size(), 2u);
    EXPECT_EQ(gpu.usable.terms[0].bytes.bytes, 123 * kGiB);
}

TEST(ProbeFixtures, Rx7900XtxIsDiscreteAndItsBudgetIsFreeVram) {
    const auto r = probe_fixture("rx7900xtx");
    ASSERT_EQ(r.devices.size(), 2u);
    const auto& gpu = r.devices[0];
    EXPECT_EQ(gpu.id, "amd:card1");
    EXPECT_EQ(gpu.kind, DeviceKind::discrete);
    EXPECT_EQ(*gpu.compute.value, "gfx1100");
    EXPECT_EQ(gpu.name, "AMD Radeon RX 7900 XTX / XT");
    EXPECT_EQ(bytes(gpu.pool(PoolKind::vram)->total), 25753026560u);
    EXPECT_EQ(bytes(gpu.usable.budget), 25753026560u - kGiB);
    EXPECT_EQ(gpu.usable.binding, "VRAM free");
    EXPECT_EQ(*r.system.linux_firmware.value, "20240318");
    EXPECT_EQ(r.system.linux_firmware.detail,
              "/var/lib/dpkg/status: linux-firmware 20240318.git3b128b60-0ubuntu2.7");
}

TEST(ProbeFixtures, CpuContainerBudgetIsTheCgroupHeadroom) {
    const auto r = probe_fixture("cpu-container-16g");
    ASSERT_EQ(r.devices.size(), 1u);
    const auto& cpu = r.devices[0];
    EXPECT_EQ(cpu.kind, DeviceKind::cpu);
    EXPECT_TRUE(r.system.cgroup_limited());
    EXPECT_EQ(bytes(r.system.cgroup_max), 16 * kGiB);
    EXPECT_EQ(r.system.cgroup_max->detail, "/sys/fs/cgroup/memory.max");
    EXPECT_EQ(bytes(r.system.cgroup_current), 2 * kGiB);
    EXPECT_EQ(bytes(cpu.usable.budget), 14 * kGiB);
    EXPECT_EQ(cpu.usable.binding, "cgroup headroom");
    EXPECT_EQ(bytes(cpu.pool(PoolKind::host_ram)->total), 65536000ull * 1024);
    EXPECT_FALSE(r.system.linux_firmware.ok());
}

TEST(ProbeFixtures, StaleProcessHoldingGttIsNamedWithItsCommandAndCountedOncePerClient) {
    const auto r = probe_fixture("strix-halo-traps");
    const auto& gpu = r.devices.at(0);
    // One row per process and pool: 12 KiB of VRAM and 40 GiB of GTT. fd 5 and fd 6 are the same DRM client
    // (same drm-client-id), so it is 40 GiB, not 80.
    ASSERT_EQ(gpu.processes.size(), 2u);
    EXPECT_EQ(gpu.processes[0].pool, PoolKind::vram);
    EXPECT_EQ(gpu.processes[0].bytes.bytes, 12 * 1024u);
    const auto& p = gpu.processes[1];
    EXPECT_EQ(p.pid, 4242);
    EXPECT_EQ(p.pool, PoolKind::gtt);
    EXPECT_EQ(p.bytes.bytes, 40 * kGiB);
    EXPECT_EQ(p.bytes.detail, "DRM fdinfo /proc/4242/fdinfo/5");
    EXPECT_EQ(p.command, "/opt/llama/llama-server -m /models/llama-3.3-70b-q4_k_m.gguf --port 8081");
    EXPECT_EQ(r.system.env.at("GGML_CUDA_ENABLE_UNIFIED_MEMORY"), "1");
    EXPECT_EQ(r.system.env.at("HSA_OVERRIDE_GFX_VERSION"), "11.0.0");
    EXPECT_EQ(*r.system.linux_firmware.value, "20251125");
    EXPECT_EQ(r.system.linux_firmware.detail, "/var/lib/pacman/local/linux-firmware-20251125.b3c4d5e6-1");
    EXPECT_EQ(*r.system.max_map_count.value, 65530u);
    // Budget: min(GTT 124-41 = 83 GiB, MemAvailable 119 GiB, cgroup 64-3 = 61 GiB) = cgroup headroom.
    EXPECT_EQ(gpu.usable.binding, "cgroup headroom");
    EXPECT_EQ(bytes(gpu.usable.budget), 61 * kGiB);
}

TEST(ProbeFixtures, NoNvmlOrVulkanOnACapturedTreeAndTheReportSaysSo) {
    const auto r = probe_fixture("rx7900xtx");
    ASSERT_EQ(r.notes.size(), 2u);
    EXPECT_NE(r.notes[0].find("NVML not probed"), std::string::npos);
    EXPECT_NE(r.notes[1].find("Vulkan not probed"), std::string::npos);
}

TEST(ProbeFixtures, InjectedEnvironmentReplacesTheTreesEnviron) {
    ProbeOptions o;
    o.sysroot = sysroot_fixture("strix-halo-traps");
    o.env = Env{{"FOO", "bar"}};
    const auto r = probe(o);
    EXPECT_EQ(r.system.env_source, "injected");
    EXPECT_EQ(r.system.env.count("GGML_CUDA_ENABLE_UNIFIED_MEMORY"), 0u);
}

}  // namespace
}  // namespace loch::devices
