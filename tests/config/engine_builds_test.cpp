// Which engine binary reaches which backend: the folders scripts/setup.sh lays out, files built by hand, and
// the backend a device gets from the builds that exist.
#include <gtest/gtest.h>

#include "config/config.hpp"
#include "config/engine_builds.hpp"
#include "support/engine_build_dir.hpp"
#include "support/temp_dir.hpp"

namespace loch::config {
namespace {

using loch::test::TempDir;
using loch::test::write_engine_build;

TEST(EngineBuilds, EachBackendFolderIsItsOwnBuildAndTheCpuOnesAreSaidSo) {
    TempDir dir("loch-builds");
    write_engine_build(dir.path(), "cpu", {"llama-server", "sd-server"});
    write_engine_build(dir / "cuda", "cuda", {"llama-server"}, "61;90");
    const auto builds = find_engine_builds(dir.path(), "llama-server", dir / "llama-server");
    ASSERT_EQ(builds.size(), 2u);
    EXPECT_EQ(builds[0].backend, "cuda");
    EXPECT_EQ(builds[0].targets, "61;90");
    EXPECT_EQ(builds[1].backend, "cpu");
    EXPECT_EQ(build_for(builds, "cuda")->program, dir / "cuda" / "llama-server");
    EXPECT_EQ(build_for(builds, "cpu")->program, dir / "llama-server");
    // A CPU build never stands in for a GPU backend: it would exit at `--device ROCm0`.
    EXPECT_EQ(build_for(builds, "rocm"), nullptr);
    EXPECT_EQ(build_for(find_engine_builds(dir.path(), "sd-server", dir / "sd-server"), "cuda"), nullptr);
}

TEST(EngineBuilds, ABinaryNothingDescribesMayReachAnyBackend) {
    TempDir dir("loch-builds");
    write_engine_build(dir.path(), "", {"llama-server"});  // copied by hand: no engine-build.json
    const auto builds = find_engine_builds(dir.path(), "llama-server", dir / "llama-server");
    ASSERT_EQ(builds.size(), 1u);
    EXPECT_EQ(builds[0].backend, "");
    EXPECT_NE(builds[0].from.find("unknown"), std::string::npos) << builds[0].from;
    EXPECT_NE(build_for(builds, "cuda"), nullptr);
    EXPECT_NE(build_for(builds, "cpu"), nullptr);
}

TEST(EngineBuilds, AFileThatNamesNoBackendIsNoEngineBuildFile) {
    // Found by fuzz_engine_build: `"backend": ""` used to pass as a file that said nothing, unexplained.
    const auto b = describe_engine_build(R"({"backend": "", "engines": {"llama-server": "abc"}})",
                                         "llama-server", "/x/llama-server", "/x/engine-build.json");
    EXPECT_EQ(b.backend, "");
    EXPECT_NE(b.from.find("is not an engine-build file"), std::string::npos) << b.from;
}

TEST(EngineBuilds, AFolderWithoutItsFileIsNamedByItsFolder) {
    TempDir dir("loch-builds");
    write_engine_build(dir / "vulkan", "", {"llama-server"});
    const auto builds = find_engine_builds(dir.path(), "llama-server", {});
    ASSERT_EQ(builds.size(), 1u);
    EXPECT_EQ(builds[0].backend, "vulkan");
}

TEST(EngineBuilds, ConfigChoosesTheProgramAndTheDevicesBackendFromTheBuilds) {
    TempDir dir("loch-builds");
    write_engine_build(dir.path(), "cpu", {"llama-server"});
    write_engine_build(dir / "vulkan", "vulkan", {"llama-server"});
    Config c;
    c.programs["llama-server"] = dir / "llama-server";
    c.builds["llama-server"] = find_engine_builds(dir.path(), "llama-server", dir / "llama-server");
    EXPECT_EQ(c.program("llama-server", "vulkan"), dir / "vulkan" / "llama-server");
    EXPECT_EQ(c.program("llama-server", "cpu"), dir / "llama-server");
    EXPECT_TRUE(c.program("llama-server", "cuda").empty());
    EXPECT_FALSE(c.reaches("llama-server", "cuda"));
    EXPECT_TRUE(c.reaches("command", "cuda"));  // a kind without a program runs anywhere
    // An NVIDIA GPU with no CUDA build but a Vulkan one gets the Vulkan build; an AMD one too.
    EXPECT_EQ(c.backend_for("nvidia:0", {"cuda", "vulkan"}), "vulkan");
    EXPECT_EQ(c.backend_for("amd:card0", {"rocm", "vulkan"}), "vulkan");
    // The config's word wins.
    DeviceConfig d;
    d.id = "nvidia:0";
    d.backend = "cuda";
    c.devices["nvidia:0"] = d;
    EXPECT_EQ(c.backend_for("nvidia:0", {"cuda", "vulkan"}), "cuda");
    // No build of any GPU backend: the device's own (the doctor says it has none).
    Config bare;
    EXPECT_EQ(bare.backend_for("amd:card0", {"rocm", "vulkan"}), "rocm");
}

}  // namespace
}  // namespace loch::config
