// `loch doctor` end to end on captured trees: exit status 2 on errors, JSON findings, clean trees pass.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "devices/run_loch.hpp"
#include "devices/sysroot_fixture.hpp"

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
    const auto run = run_loch({"doctor", "--sysroot", sysroot_fixture("rx7900xtx").string()});
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

TEST(CliDoctor, AFileThatIsNotGgufIsAnErrorNamingIt) {
    const auto run = run_loch({"doctor", "--model", std::string(LOCH_SOURCE_DIR) + "/CMakeLists.txt"});
    EXPECT_EQ(run.status, 1);
}

}  // namespace
}  // namespace loch::doctor
