// engine-build-missing: a GPU that no engine build reaches is named, with the setup command that builds one.
#include <gtest/gtest.h>

#include "doctor/doctor.hpp"
#include "finding_lookup.hpp"

namespace loch::doctor {
namespace {

devices::DeviceReport with_gpu(devices::Vendor vendor, std::string id, bool software = false) {
    devices::DeviceReport r;
    devices::Device gpu;
    gpu.id = std::move(id);
    gpu.vendor = vendor;
    gpu.kind = devices::DeviceKind::discrete;
    gpu.name = "a GPU";
    gpu.software = software;
    r.devices.push_back(gpu);
    devices::Device cpu;
    cpu.id = "cpu";
    r.devices.push_back(cpu);
    return r;
}

TEST(EngineBuildMissing, AnNvidiaGpuWithOnlyCpuBuildsIsAnErrorWithTheFix) {
    Input in;
    in.engine_builds = {{"llama-server", "/opt/loch/llama-server", "cpu", "/opt/loch/engine-build.json"},
                        {"sd-server", "/opt/loch/sd-server", "cpu", "/opt/loch/engine-build.json"}};
    const auto findings = diagnose(with_gpu(devices::Vendor::nvidia, "nvidia:0"), in);
    const auto* f = find(findings, "engine-build-missing");
    ASSERT_NE(f, nullptr);
    EXPECT_EQ(f->severity, Severity::error);
    EXPECT_EQ(f->device, "nvidia:0");
    EXPECT_NE(f->explanation.find("llama-server"), std::string::npos) << f->explanation;
    EXPECT_NE(f->explanation.find("only builds for cpu"), std::string::npos) << f->explanation;
    EXPECT_NE(f->fix.find("bash scripts/setup.sh --backend cuda"), std::string::npos) << f->fix;
    EXPECT_NE(f->fix.find("nvcc"), std::string::npos) << f->fix;
}

TEST(EngineBuildMissing, ABuildThatReachesItIsEnough) {
    Input in;
    in.engine_builds = {{"llama-server", "/b/llama-server", "cpu", ""},
                        {"llama-server", "/b/vulkan/llama-server", "vulkan", ""}};
    EXPECT_EQ(find(diagnose(with_gpu(devices::Vendor::nvidia, "nvidia:0"), in), "engine-build-missing"),
              nullptr);
    EXPECT_EQ(find(diagnose(with_gpu(devices::Vendor::amd, "amd:card0"), in), "engine-build-missing"),
              nullptr);
    // A build nothing describes may reach it: no finding (loch starts it there, as before).
    in.engine_builds = {{"llama-server", "/usr/bin/llama-server", "", "no engine-build.json"}};
    EXPECT_EQ(find(diagnose(with_gpu(devices::Vendor::nvidia, "nvidia:0"), in), "engine-build-missing"),
              nullptr);
}

TEST(EngineBuildMissing, OnlyTheImageEngineMissingIsAWarning) {
    Input in;
    in.engine_builds = {{"llama-server", "/b/rocm/llama-server", "rocm", ""},
                        {"sd-server", "/b/sd-server", "cpu", ""}};
    const auto findings = diagnose(with_gpu(devices::Vendor::amd, "amd:card0"), in);  // (f points into it)
    const auto* f = find(findings, "engine-build-missing");
    ASSERT_NE(f, nullptr);
    EXPECT_EQ(f->severity, Severity::warning);
    EXPECT_NE(f->explanation.find("sd-server"), std::string::npos);
}

TEST(EngineBuildMissing, SoftwareVulkanAndUncheckedBuildsSayNothing) {
    Input in;
    in.engine_builds = {{"llama-server", "/b/llama-server", "cpu", ""}};
    EXPECT_EQ(find(diagnose(with_gpu(devices::Vendor::vulkan, "vulkan:0", true), in), "engine-build-missing"),
              nullptr);
    EXPECT_EQ(find(diagnose(with_gpu(devices::Vendor::nvidia, "nvidia:0"), Input{}), "engine-build-missing"),
              nullptr);
}

}  // namespace
}  // namespace loch::doctor
