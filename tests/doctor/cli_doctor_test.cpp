// `loch doctor` end to end on captured trees: exit status 2 on errors, JSON findings, clean trees pass.
#include <gtest/gtest.h>

#include <fstream>

#include <nlohmann/json.hpp>

#include "devices/run_loch.hpp"
#include "devices/sysroot_fixture.hpp"
#include "support/engine_build_dir.hpp"
#include "support/synth_model.hpp"
#include "support/temp_dir.hpp"

namespace loch::doctor {
namespace {

using loch::testing::run_loch;
using loch::testing::sysroot_fixture;

TEST(CliDoctor, ErrorsGiveExitStatus2AndJsonFindings) {
    const auto run =
        run_loch({"doctor", "--json", "--sysroot", sysroot_fixture("strix-halo-traps").string()});
    EXPECT_EQ(run.status, 2) << run.out;
    const auto j = nlohmann::json::parse(run.out);
    ASSERT_GE(j.at("findings").size(), 1u);
    EXPECT_EQ(j.at("findings").at(0).at("severity"), "error");
    bool saw_process = false;
    for (const auto& f : j.at("findings"))
        if (f.at("id") == "outside-gpu-process") {
            saw_process = true;
            EXPECT_EQ(f.at("evidence").at(1).at("bytes"), 40ull << 30);
        }
    EXPECT_TRUE(saw_process) << run.out;
    EXPECT_TRUE(j.at("report").at("devices").is_array());
}

TEST(CliDoctor, CleanTreeExitsZero) {
    // With the engines setup.sh builds for a Radeon (CPU and Vulkan): nothing to say.
    loch::test::TempDir engines("loch-engines");
    loch::test::write_engine_build(engines.path(), "cpu", {"llama-server"});
    loch::test::write_engine_build(engines.path() / "vulkan", "vulkan", {"llama-server"});
    const auto run = run_loch({"doctor", "--sysroot", sysroot_fixture("rx7900xtx").string(), "--engine-dir",
                               engines.path().string()});
    EXPECT_EQ(run.status, 0) << run.out;
    EXPECT_NE(run.out.find("No problems found."), std::string::npos) << run.out;
}

TEST(CliDoctor, EngineFlagReachesTheVulkanCheck) {
    const auto run = run_loch({"doctor", "--json", "--engine", "vulkan", "--sysroot",
                               sysroot_fixture("strix-halo-tuned").string()});
    const auto j = nlohmann::json::parse(run.out);
    bool saw = false;
    for (const auto& f : j.at("findings")) saw = saw || f.at("id") == "vulkan-heap-too-small";
    EXPECT_TRUE(saw) << run.out;
}

// The first user of a GPU box: setup built only CPU engines (no nvcc), and loch's doctor says so with the
// fix.
TEST(CliDoctor, AnNvidiaGpuWithOnlyCpuEnginesIsNamedWithTheFix) {
    loch::test::TempDir engines("loch-engines");
    loch::test::write_engine_build(engines.path(), "cpu", {"llama-server", "llama-fit-params"});
    const auto run = run_loch({"doctor", "--json", "--sysroot", sysroot_fixture("cpu-container-16g").string(),
                               "--engine-dir", engines.path().string()},
                              {std::string("LOCH_NVML_LIBRARY=") + LOCH_NVML_DOUBLE});
    EXPECT_EQ(run.status, 2) << run.out;
    const auto j = nlohmann::json::parse(run.out);
    const nlohmann::json* found = nullptr;
    for (const auto& f : j.at("findings"))
        if (f.at("id") == "engine-build-missing") found = &f;
    ASSERT_NE(found, nullptr) << run.out;
    EXPECT_EQ(found->at("device"), "nvidia:0");
    EXPECT_EQ(found->at("severity"), "error");
    EXPECT_NE(found->at("fix").get<std::string>().find("bash scripts/setup.sh --backend cuda"),
              std::string::npos);
    EXPECT_NE(found->dump().find((engines.path() / "llama-server").string()), std::string::npos)
        << found->dump();
    // With a CUDA build beside it, the GPU is reached and the finding goes.
    loch::test::write_engine_build(engines.path() / "cuda", "cuda", {"llama-server", "llama-fit-params"},
                                   "90");
    const auto fixed =
        run_loch({"doctor", "--json", "--sysroot", sysroot_fixture("cpu-container-16g").string(),
                  "--engine-dir", engines.path().string()},
                 {std::string("LOCH_NVML_LIBRARY=") + LOCH_NVML_DOUBLE});
    EXPECT_EQ(fixed.out.find("engine-build-missing"), std::string::npos) << fixed.out;
}

// `loch doctor -c`: the config's context × slots that the captured container (16 GiB) can never give is named
// with the largest context that fits, as `loch serve` warns at start; a context that fits says nothing.
TEST(CliDoctor, AConfiguredLimitThatNoDeviceKeepsIsNamedWithTheLargestThatFits) {
    loch::test::SynthModel model({"--preset", "qwen2.5-7b", "--weights", "zeros"});
    loch::test::TempDir dir("loch-doctor-config");
    const auto config = [&](int ctx) {
        const auto path = dir.path() / ("loch-" + std::to_string(ctx) + ".yaml");
        std::ofstream(path) << "models:\n  - name: chat\n    path: " << model.path().string()
                            << "\n    args: {ctx: " << ctx << ", parallel: 16}\n";
        return path.string();
    };
    const auto said = [&](int ctx) {
        const auto run = run_loch({"doctor", "--json", "-c", config(ctx), "--sysroot",
                                   sysroot_fixture("cpu-container-16g").string()});
        const auto j = nlohmann::json::parse(run.out);
        for (const auto& f : j.at("findings"))
            if (f.at("id") == "limit-never-fits") return f.dump();
        return std::string();
    };
    const auto never = said(131072);
    ASSERT_FALSE(never.empty());
    EXPECT_NE(never.find("args.ctx 131072 with 16 slot(s)"), std::string::npos) << never;
    EXPECT_NE(never.find("the largest context that fits"), std::string::npos) << never;
    EXPECT_TRUE(said(8192).empty());
}

TEST(CliDoctor, AFileThatIsNotGgufIsAnErrorNamingIt) {
    const auto run = run_loch({"doctor", "--model", std::string(LOCH_SOURCE_DIR) + "/CMakeLists.txt"});
    EXPECT_EQ(run.status, 1);
}

}  // namespace
}  // namespace loch::doctor
