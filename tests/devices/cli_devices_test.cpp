// `loch devices` end to end on captured trees: JSON with exact bytes and sources, LOCH_NVML_LIBRARY reaching
// the probe, and a readable text report.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "devices/run_loch.hpp"
#include "devices/sysroot_fixture.hpp"
#include "support/engine_build_dir.hpp"
#include "support/temp_dir.hpp"

namespace loch::devices {
namespace {

using loch::testing::run_loch;
using loch::testing::sysroot_fixture;

const nlohmann::json& device(const nlohmann::json& j, const std::string& id) {
    for (const auto& d : j.at("devices"))
        if (d.at("id") == id) return d;
    throw std::runtime_error("no device " + id + " in " + j.dump());
}

TEST(CliDevices, JsonCarriesExactBytesSourcesAndTheUsableRule) {
    const auto run =
        run_loch({"devices", "--json", "--sysroot", sysroot_fixture("strix-halo-stock").string()});
    ASSERT_EQ(run.status, 0) << run.out;
    const auto j = nlohmann::json::parse(run.out);
    const auto& gpu = device(j, "amd:card0");
    EXPECT_EQ(gpu.at("kind"), "integrated");
    EXPECT_EQ(gpu.at("compute").at("value"), "gfx1151");
    const auto& gtt = gpu.at("pools").at(2);
    EXPECT_EQ(gtt.at("kind"), "gtt");
    EXPECT_EQ(gtt.at("total").at("bytes"), 25769803776u);
    EXPECT_EQ(gtt.at("total").at("source"), "measured");
    EXPECT_EQ(gtt.at("total").at("detail"), "sysfs card0/device/mem_info_gtt_total");
    EXPECT_EQ(gpu.at("usable").at("bytes"), 25769803776u - 536870912u);
    EXPECT_EQ(gpu.at("usable").at("binding"), "GTT headroom");
    // RADV's figures from the tree's vulkan.json: 2/3 of carve-out + GTT, and 4 GiB in one buffer.
    EXPECT_EQ(gpu.at("vulkan_device_local_heap").at("bytes"), 80ull << 30);
    EXPECT_EQ(gpu.at("vulkan_max_allocation").at("bytes"), 4294967292u);
    EXPECT_EQ(j.at("system").at("max_map_count").at("value"), 1048576);
}

TEST(CliDevices, LochNvmlLibraryLoadsTheTestDoubleThroughTheCli) {
    const auto run =
        run_loch({"devices", "--json", "--sysroot", sysroot_fixture("cpu-container-16g").string()},
                 {std::string("LOCH_NVML_LIBRARY=") + LOCH_NVML_DOUBLE});
    ASSERT_EQ(run.status, 0) << run.out;
    const auto j = nlohmann::json::parse(run.out);
    const auto& gpu = device(j, "nvidia:0");
    EXPECT_EQ(gpu.at("name"), "NVIDIA H200");
    EXPECT_EQ(gpu.at("pools").at(0).at("free").at("bytes"), 150754820096ull - (20ull << 30));
    EXPECT_EQ(gpu.at("pools").at(0).at("free").at("detail"), "NVML nvmlDeviceGetMemoryInfo_v2(0).free");
}

TEST(CliDevices, TextReportNamesPoolsBudgetAndHolders) {
    const auto run = run_loch({"devices", "--sysroot", sysroot_fixture("strix-halo-traps").string()});
    ASSERT_EQ(run.status, 0) << run.out;
    EXPECT_NE(run.out.find("VRAM (BIOS carve-out):"), std::string::npos) << run.out;
    EXPECT_NE(run.out.find("usable:    61.00 GiB (65498251264 B)"), std::string::npos) << run.out;
    EXPECT_NE(run.out.find("PID 4242 holds 40.00 GiB of gtt"), std::string::npos) << run.out;
}

TEST(CliDevices, EachDeviceNamesTheEngineBinariesLochWouldStart) {
    loch::test::TempDir engines("loch-engines");
    loch::test::write_engine_build(engines.path(), "cpu", {"llama-server"});
    const std::vector<std::string> nvml{std::string("LOCH_NVML_LIBRARY=") + LOCH_NVML_DOUBLE};
    const std::vector<std::string> args{"devices", "--sysroot", sysroot_fixture("cpu-container-16g").string(),
                                        "--engine-dir", engines.path().string()};
    auto with_json = args;
    with_json.insert(with_json.begin() + 1, "--json");
    auto run = run_loch(with_json, nvml);
    ASSERT_EQ(run.status, 0) << run.out;
    auto j = nlohmann::json::parse(run.out);
    EXPECT_EQ(device(j, "nvidia:0").at("engine_backend"), "cuda");
    EXPECT_TRUE(device(j, "nvidia:0").at("engines").at("llama-server").is_null()) << run.out;
    EXPECT_EQ(device(j, "cpu").at("engines").at("llama-server"), (engines.path() / "llama-server").string());
    // Loudly in the text report, with the command that fixes it.
    run = run_loch(args, nvml);
    EXPECT_NE(run.out.find("NONE: only builds for other backends"), std::string::npos) << run.out;
    EXPECT_NE(run.out.find("bash scripts/setup.sh --backend cuda"), std::string::npos) << run.out;
    // A Vulkan build reaches the NVIDIA GPU when there is no CUDA one: loch would start that.
    loch::test::write_engine_build(engines.path() / "vulkan", "vulkan", {"llama-server"});
    j = nlohmann::json::parse(run_loch(with_json, nvml).out);
    EXPECT_EQ(device(j, "nvidia:0").at("engine_backend"), "vulkan");
    EXPECT_EQ(device(j, "nvidia:0").at("engines").at("llama-server"),
              (engines.path() / "vulkan" / "llama-server").string());
}

// A device only Vulkan reports — lavapipe, a software implementation — is listed with its heap, its largest
// allocation and its Vulkan index, and marked: loch uses it only where the config names it.
TEST(CliDevices, AVulkanOnlyDeviceIsListedWithItsDriversBounds) {
    loch::testing::ScratchSysroot tree("cpu-container-16g");
    tree.write(
        "/vulkan.json",
        R"J({"devices": [{"vendor_id": "0x10005", "device_id": "0x0000", "name": "llvmpipe (LLVM 15.0.6, 256 bits)",
                   "type": "cpu", "device_local_heap_bytes": 2147483648, "max_allocation_bytes": 2147483648}]})J");
    const auto run = run_loch({"devices", "--json", "--sysroot", tree.path().string()});
    ASSERT_EQ(run.status, 0) << run.out;
    const auto j = nlohmann::json::parse(run.out);
    const auto& v = device(j, "vulkan:0");
    EXPECT_EQ(v.at("vendor"), "vulkan");
    EXPECT_EQ(v.at("software"), true);
    EXPECT_EQ(v.at("vulkan_index"), 0);
    EXPECT_EQ(v.at("vulkan_device_local_heap").at("bytes"), 2147483648u);
    EXPECT_EQ(v.at("vulkan_max_allocation").at("bytes"), 2147483648u);
    EXPECT_EQ(v.at("pools").at(0).at("total").at("bytes"), 2147483648u);
}

TEST(CliDevices, MissingSysrootIsAnErrorNotAnEmptyReport) {
    const auto run = run_loch({"devices", "--sysroot", "/nonexistent/tree"});
    EXPECT_NE(run.status, 0);
}

}  // namespace
}  // namespace loch::devices
