// Footprints remembered across restarts: kept per launch, raised only upward, written atomically, and a
// changed setting, file or driver is another key.
#include <gtest/gtest.h>

#include <fstream>

#include "broker/remembered.hpp"
#include "support/temp_dir.hpp"

namespace loch::broker {
namespace {

FootprintKey key(const std::filesystem::path& model, const std::string& ctx = "4096") {
    return {"chat",      "cpu", "llama-server", {"llama-server", "-m", model.string(), "-c", ctx}, model,
            "/bin/true", ""};
}

TEST(RememberedFootprints, TheHighestMeasuredIsKeptAcrossARestartAsMeasuredEarlier) {
    test::TempDir dir("loch-remembered");
    const auto model = dir.path() / "m.gguf";
    std::ofstream(model) << "weights";
    const auto file = dir.path() / "footprints.json";
    {
        RememberedFootprints r(file);
        EXPECT_FALSE(r.get(key(model)));
        r.raise(key(model), {500 * kMiB, Source::measured, "RSS"});
        r.raise(key(model), {400 * kMiB, Source::measured, "RSS"});  // lower: ignored
        EXPECT_EQ(r.get(key(model))->bytes, 500 * kMiB);
    }
    RememberedFootprints again(file);
    ASSERT_TRUE(again.get(key(model)));
    EXPECT_EQ(again.get(key(model))->bytes, 500 * kMiB);
    EXPECT_EQ(again.get(key(model))->source, Source::measured_earlier);
    // Another setting, another model file content, another driver: nothing is known of them.
    EXPECT_FALSE(again.get(key(model, "8192")));
    auto k = key(model);
    k.driver = "580.1";
    EXPECT_FALSE(again.get(k));
    const auto before = std::filesystem::last_write_time(model);
    std::ofstream(model) << "other weights";
    std::filesystem::last_write_time(model, before + std::chrono::seconds(2));  // a later file
    EXPECT_FALSE(again.get(key(model)));
}

TEST(RememberedFootprints, ADamagedFileStartsEmptyAndSmallGrowthIsNotWrittenEachTime) {
    test::TempDir dir("loch-remembered-bad");
    const auto file = dir.path() / "footprints.json";
    std::ofstream(file) << "{ not json";
    RememberedFootprints r(file);
    EXPECT_EQ(r.size(), 0u);
    r.raise(key("/m"), {100 * kMiB, Source::measured, ""});
    r.raise(key("/m"), {100 * kMiB + 4096, Source::measured, ""});  // < 1 MiB more: not written
    EXPECT_EQ(RememberedFootprints(file).get(key("/m"))->bytes, 100 * kMiB);
    EXPECT_EQ(r.get(key("/m"))->bytes, 100 * kMiB + 4096);
}

}  // namespace
}  // namespace loch::broker
