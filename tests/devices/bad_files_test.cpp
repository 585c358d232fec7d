// Bad or missing files never crash a probe: the figure is unknown and the reason names the file and the
// fault.
#include <gtest/gtest.h>

#include <algorithm>

#include "devices/probe.hpp"
#include "devices/sysroot_fixture.hpp"

namespace loch::devices {
namespace {

using loch::testing::ScratchSysroot;

DeviceReport probe_at(const std::filesystem::path& root) {
    ProbeOptions o;
    o.sysroot = root;
    return probe(o);
}

TEST(BadFiles, CorruptTreeGivesUnknownFiguresWithReasons) {
    const auto r = probe_at(loch::testing::sysroot_fixture("corrupt"));
    EXPECT_FALSE(r.system.mem_total.ok());
    EXPECT_EQ(r.system.mem_total.detail, "/proc/meminfo: MemTotal is not \"<number> kB\": \"lots\"");
    EXPECT_FALSE(r.system.mem_available.ok());
    EXPECT_FALSE(r.system.max_map_count.ok());
    EXPECT_EQ(r.system.max_map_count.detail, "/proc/sys/vm/max_map_count: not a number: \"-5\"");
    EXPECT_FALSE(r.system.cgroup.ok());
    EXPECT_FALSE(r.system.ttm_pages_limit.ok());
    EXPECT_EQ(r.system.ttm_pages_limit.detail, "/sys/module/ttm/parameters/pages_limit: empty");
    EXPECT_FALSE(r.system.amdgpu_gttsize_mib.ok());
    EXPECT_TRUE(r.system.env.empty());  // "=novalue" and "NOEQUALS" are not variables

    ASSERT_EQ(r.devices.size(), 2u);
    const auto& gpu = r.devices[0];
    const auto* vram = gpu.pool(PoolKind::vram);
    EXPECT_EQ(vram->total.detail, "/sys/class/drm/card0/device/mem_info_vram_total: empty");
    EXPECT_EQ(vram->used.detail, "/sys/class/drm/card0/device/mem_info_vram_used: not a number: \"12abc\"");
    EXPECT_FALSE(vram->free.ok());
    const auto* gtt = gpu.pool(PoolKind::gtt);
    EXPECT_FALSE(gtt->total.ok());  // 26 digits overflow 64 bits
    EXPECT_NE(gtt->total.detail.find("not a number"), std::string::npos);
    EXPECT_TRUE(gtt->used.ok());
    EXPECT_EQ(gpu.pool(PoolKind::vis_vram)->total.detail,
              "/sys/class/drm/card0/device/mem_info_vis_vram_total: missing");
    EXPECT_FALSE(gpu.compute.ok());
    EXPECT_TRUE(gpu.processes.empty());  // "many KiB" and "5 PiB" are not sizes
    EXPECT_FALSE(gpu.usable.budget.ok());
    EXPECT_FALSE(r.devices[1].usable.budget.ok());
    EXPECT_NE(r.devices[1].usable.budget.detail.find("MemAvailable unknown"), std::string::npos);
}

TEST(BadFiles, EmptyTreeStillHasTheCpuWithEverythingUnknown) {
    const auto dir =
        std::filesystem::temp_directory_path() / ("loch-empty-root-" + std::to_string(::getpid()));
    std::filesystem::create_directories(dir);
    const auto r = probe_at(dir);
    std::filesystem::remove_all(dir);
    ASSERT_EQ(r.devices.size(), 1u);
    EXPECT_EQ(r.system.mem_total.detail, "/proc/meminfo: missing");
    EXPECT_EQ(r.devices[0].usable.budget.detail, "MemAvailable unknown: /proc/meminfo: missing");
    EXPECT_FALSE(r.system.linux_firmware.ok());
    EXPECT_FALSE(r.system.cmdline.ok());
}

TEST(BadFiles, ADirectoryWhereAFileShouldBeIsUnknownNotACrash) {
    ScratchSysroot tree("strix-halo-tuned");
    tree.remove("/sys/class/drm/card0/device/mem_info_gtt_total");
    tree.write("/sys/class/drm/card0/device/mem_info_gtt_total/oops", "1\n");
    tree.remove("/proc/meminfo");
    tree.write("/proc/meminfo/oops", "1\n");
    const auto r = probe_at(tree.path());
    EXPECT_FALSE(r.system.mem_total.ok());
    EXPECT_FALSE(r.devices[0].pool(PoolKind::gtt)->total.ok());
    EXPECT_FALSE(r.devices[0].usable.budget.ok());
    EXPECT_NE(r.devices[0].usable.budget.detail.find("GTT unknown"), std::string::npos)
        << r.devices[0].usable.budget.detail;
}

TEST(BadFiles, UsedAboveTotalIsUnknownFreeRatherThanAnUnderflow) {
    ScratchSysroot tree("rx7900xtx");
    tree.write("/sys/class/drm/card1/device/mem_info_vram_used", "99999999999\n");
    const auto r = probe_at(tree.path());
    const auto* vram = r.devices[0].pool(PoolKind::vram);
    EXPECT_FALSE(vram->free.ok());
    EXPECT_NE(vram->free.detail.find("exceeds total"), std::string::npos);
    EXPECT_FALSE(r.devices[0].usable.budget.ok());
}

TEST(Parsing, NumbersAreStrict) {
    EXPECT_EQ(parse_u64("123"), 123u);
    EXPECT_EQ(parse_u64("0x1002"), 0x1002u);
    EXPECT_FALSE(parse_u64("").has_value());
    EXPECT_FALSE(parse_u64("-1").has_value());
    EXPECT_FALSE(parse_u64("12 ").has_value());
    EXPECT_FALSE(parse_u64("18446744073709551616").has_value());
    EXPECT_EQ(parse_i64("-1"), -1);
}

TEST(Parsing, EnvironAcceptsNulOrNewlineSeparators) {
    const auto nul = parse_environ(std::string_view("A=1\0B=x=y\0", 10));
    EXPECT_EQ(nul.at("A"), "1");
    EXPECT_EQ(nul.at("B"), "x=y");
    const auto nl = parse_environ("A=1\nEMPTY=\n");
    EXPECT_EQ(nl.at("EMPTY"), "");
}

// A captured tree's vulkan.json (RADV's figures): read when it is well formed, a note naming the file when
// it is not, and a wrong entry never crashes or fills the figures with garbage.
TEST(BadFiles, VulkanCaptureIsReadOrExplained) {
    const auto good = probe_at(loch::testing::sysroot_fixture("strix-halo-stock"));
    const auto& apu = good.devices.front();
    ASSERT_TRUE(apu.vulkan_device_local_heap.ok()) << apu.vulkan_device_local_heap.detail;
    EXPECT_EQ(apu.vulkan_device_local_heap->bytes, 80ull << 30);  // 2/3 of 96 GiB carve-out + 24 GiB GTT
    ASSERT_TRUE(apu.vulkan_max_allocation.ok());
    EXPECT_EQ(apu.vulkan_max_allocation->bytes, 4294967292u);
    EXPECT_NE(apu.vulkan_max_allocation.detail.find("vulkan.json"), std::string::npos);

    ScratchSysroot tree("strix-halo-stock");
    for (const std::string bad : {"{not json", "[]", R"({"devices": 5})",
                                  R"({"devices": [1, {"vendor_id": "zz", "device_id": []},
                                     {"vendor_id": "0x1002", "device_id": "0x1586",
                                      "device_local_heap_bytes": -1, "max_allocation_bytes": "4 GiB"}]})"}) {
        tree.write("/vulkan.json", bad);
        const auto r = probe_at(tree.path());
        SCOPED_TRACE(bad);
        EXPECT_FALSE(r.devices.front().vulkan_device_local_heap.ok());
        EXPECT_FALSE(r.devices.front().vulkan_max_allocation.ok());
    }
    tree.write("/vulkan.json", "{not json");
    const auto r = probe_at(tree.path());
    EXPECT_TRUE(std::any_of(r.notes.begin(), r.notes.end(), [](const std::string& n) {
        return n.find("vulkan.json: not a JSON object") != n.npos;
    }));
}

}  // namespace
}  // namespace loch::devices
