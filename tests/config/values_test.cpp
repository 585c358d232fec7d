// Sizes, durations and names: the value parsers every part of the config uses.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "config/config.hpp"

namespace loch::config {
namespace {

using ::testing::HasSubstr;

TEST(ConfigValues, Sizes) {
    EXPECT_EQ(parse_size("0"), 0u);
    EXPECT_EQ(parse_size("4096"), 4096u);
    EXPECT_EQ(parse_size("512MiB"), 512ull << 20);
    EXPECT_EQ(parse_size("24GiB"), 24ull << 30);
    EXPECT_EQ(parse_size("24 gib"), 24ull << 30);
    EXPECT_EQ(parse_size("1.5GiB"), 3ull << 29);
    EXPECT_EQ(parse_size("2GB"), 2000000000u);
    EXPECT_EQ(parse_size("1k"), 1024u);
    EXPECT_EQ(parse_size("1TiB"), 1ull << 40);
    std::string why;
    EXPECT_FALSE(parse_size("-1", &why));
    EXPECT_FALSE(parse_size("GiB", &why));
    EXPECT_FALSE(parse_size("12 parsecs", &why));
    EXPECT_THAT(why, HasSubstr("unknown size unit"));
    EXPECT_FALSE(parse_size("99999999999999999999", &why));
    EXPECT_FALSE(parse_size("20000000TiB", &why));
    EXPECT_FALSE(parse_size("", &why));
}

TEST(ConfigValues, Durations) {
    EXPECT_EQ(parse_duration("90"), Seconds{90});
    EXPECT_EQ(parse_duration("90s"), Seconds{90});
    EXPECT_EQ(parse_duration("5m"), Seconds{300});
    EXPECT_EQ(parse_duration("1h30m"), Seconds{5400});
    EXPECT_EQ(parse_duration("2d"), Seconds{172800});
    EXPECT_FALSE(parse_duration("1h30"));
    EXPECT_FALSE(parse_duration("-5"));
    EXPECT_FALSE(parse_duration("9999999999999h"));
    // What people write (issue 27: "5 minutes" was "unknown duration unit ' '").
    EXPECT_EQ(parse_duration("5 minutes"), Seconds{300});
    EXPECT_EQ(parse_duration("5 min"), Seconds{300});
    EXPECT_EQ(parse_duration("30 seconds"), Seconds{30});
    EXPECT_EQ(parse_duration("1 hour 30 minutes"), Seconds{5400});
    EXPECT_EQ(parse_duration("2 days"), Seconds{172800});
    EXPECT_EQ(parse_duration("1h 30m"), Seconds{5400});
    std::string why;
    EXPECT_FALSE(parse_duration("5 fortnights", &why));
    EXPECT_NE(why.find("'fortnights'"), std::string::npos) << why;
    EXPECT_NE(why.find("minutes"), std::string::npos) << why;
}

// Issue 27: `devices: [cuda:0]` passed the check and left its model nothing to run on.
TEST(ConfigValues, DeviceIdsAreTheOnesTheProbesProduce) {
    for (const char* ok : {"cpu", "nvidia:0", "nvidia:12", "amd:card0", "amd:card1"})
        EXPECT_FALSE(device_id_problem(ok)) << ok;
    for (const auto& [bad, hint] :
         {std::pair{"cuda:0", "nvidia:0"}, std::pair{"cuda1", "nvidia:1"}, std::pair{"gpu0", "nvidia:0"},
          std::pair{"rocm:0", "amd:card0"}, std::pair{"card1", "amd:card1"}}) {
        const auto why = device_id_problem(bad);
        ASSERT_TRUE(why) << bad;
        EXPECT_NE(why->find(std::string("did you mean ") + hint), std::string::npos) << *why;
    }
    EXPECT_TRUE(device_id_problem("nvidia:"));
    EXPECT_TRUE(device_id_problem("NVIDIA:0"));
    EXPECT_TRUE(device_id_problem("vulkan0"));
}

TEST(ConfigValues, Names) {
    EXPECT_TRUE(valid_model_name("qwen2.5-7b-instruct:q4_k_m"));
    EXPECT_FALSE(valid_model_name("org/model"));
    EXPECT_FALSE(valid_model_name(".hidden"));
    EXPECT_FALSE(valid_model_name(""));
    EXPECT_FALSE(valid_model_name(std::string(129, 'a')));
    EXPECT_FALSE(valid_model_name("a b"));
    EXPECT_TRUE(valid_model_alias("meta-llama/Llama-3.1-8B"));
    EXPECT_FALSE(valid_model_alias("a//b"));
    EXPECT_FALSE(valid_model_alias("a/../b"));
    EXPECT_FALSE(valid_model_alias("/abs"));
    EXPECT_FALSE(valid_model_alias("a/"));
    EXPECT_EQ(sanitize_model_name("Qwen2.5 7B (instruct)"), "Qwen2.5-7B-instruct");
    EXPECT_EQ(sanitize_model_name("..weird"), "weird");
    EXPECT_EQ(sanitize_model_name("***"), "");
    EXPECT_TRUE(valid_model_name(sanitize_model_name("Qwen2.5 7B (instruct)")));
}

// ---- the embedded default

}  // namespace
}  // namespace loch::config
