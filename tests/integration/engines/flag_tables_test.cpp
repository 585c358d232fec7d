// Issue 51: the flag tables against the pinned engines' own --help. The test fails when an engine built by
// scripts/setup.sh has a flag its table lacks — the next engine version cannot add one silently — and, for
// llama-server (whose help lists every flag its parser takes), when the table names one the engine lacks.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "engines/flags/table.hpp"
#include "support/engine_process.hpp"
#include "support/process.hpp"
#include "support/temp_dir.hpp"

namespace loch::engines::flags {
namespace {

std::string help_of(const std::string& engine) {
    const auto exe = test::bin_dir() / engine;
    if (!std::filesystem::exists(exe))
        throw std::runtime_error(exe.string() + " is missing: bash scripts/setup.sh --all");
    test::TempDir dir;
    test::Process p(exe, {"--help"}, dir.path() / "help.txt");
    if (!p.wait_for(std::chrono::seconds(30))) throw std::runtime_error(engine + " --help did not exit");
    return p.log();
}

std::vector<std::string> missing_from(const FlagTable& table, const std::vector<std::string>& names) {
    std::vector<std::string> missing;
    for (const auto& n : names)
        if (!table.find(n)) missing.push_back(n);
    return missing;
}

TEST(FlagTables, EveryFlagOfThePinnedLlamaServerIsClassifiedAndNoOther) {
    const auto help = flag_names_in_help(help_of("llama-server"));
    ASSERT_GT(help.size(), 300u) << "llama-server --help was not read";
    EXPECT_THAT(missing_from(llama_server(), help), ::testing::IsEmpty())
        << "classify these in src/engines/flags/llama_server.cpp";
    std::vector<std::string> stale;
    for (const auto& r : llama_server().rules)
        for (auto n : r.names)
            if (std::find(help.begin(), help.end(), n) == help.end()) stale.emplace_back(n);
    EXPECT_THAT(stale, ::testing::IsEmpty()) << "the pinned llama-server has no such flag";
}

TEST(FlagTables, EveryFlagOfThePinnedSdServerIsClassified) {
    const auto help = flag_names_in_help(help_of("sd-server"));
    ASSERT_GT(help.size(), 100u) << "sd-server --help was not read";
    EXPECT_THAT(missing_from(sd_server(), help), ::testing::IsEmpty())
        << "classify these in src/engines/flags/sd_server.cpp";
}

TEST(FlagTables, EveryFlagOfThePinnedWhisperServerIsClassified) {
    const auto help = flag_names_in_help(help_of("whisper-server"));
    ASSERT_GT(help.size(), 80u) << "whisper-server --help was not read";
    EXPECT_THAT(missing_from(whisper_server(), help), ::testing::IsEmpty())
        << "classify these in src/engines/flags/whisper_server.cpp";
}

}  // namespace
}  // namespace loch::engines::flags
