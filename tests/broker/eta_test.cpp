// ETA arithmetic (broker/eta.hpp): from measured durations only, unknown (with the reason) otherwise.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "broker/eta.hpp"
#include "core/memory.hpp"

using namespace loch;
using namespace loch::broker;

TEST(Eta, ASlotWaitIsRoundsOfTheMeasuredMeanRequest) {
    SlotWait w;
    w.slots = 2;
    w.active = 2;
    w.ahead = 3;  // 2 running + 3 ahead: it is 6th; slots free at rounds 1 (3rd, 4th) and 2 (5th, 6th)
    w.avg_request_s = 4.0;
    const auto e = slot_eta(w);
    ASSERT_TRUE(e.seconds);
    EXPECT_DOUBLE_EQ(*e.seconds, 8.0);
    EXPECT_NE(e.basis.find("measured mean"), std::string::npos);
    w.ahead = 0;
    EXPECT_DOUBLE_EQ(*slot_eta(w).seconds, 4.0) << "one round: the first running request to end";
}

TEST(Eta, NothingMeasuredMeansUnknownNeverAGuess) {
    SlotWait w;
    w.slots = 1;
    w.active = 1;
    EXPECT_FALSE(slot_eta(w).seconds);
    EXPECT_NE(slot_eta(w).basis.find("unknown"), std::string::npos);
    w = {};
    w.loading = true;
    EXPECT_FALSE(slot_eta(w).seconds) << "a load never timed";
}

TEST(Eta, ALoadingModelIsTheRestOfItsLastLoad) {
    SlotWait w;
    w.loading = true;
    w.load_s = 30;
    w.loading_elapsed_s = 12;
    w.slots = 1;
    const auto e = slot_eta(w);
    ASSERT_TRUE(e.seconds);
    EXPECT_DOUBLE_EQ(*e.seconds, 18.0);
    w.ahead = 1;  // one request before it on a one-slot model: plus one measured request
    w.avg_request_s = 5;
    EXPECT_DOUBLE_EQ(*slot_eta(w).seconds, 23.0);
}

TEST(Eta, AMemoryWaitEndsWhenEnoughHoldersHaveEnded) {
    const std::uint64_t G = kGiB;
    std::vector<HolderEnd> h = {{"job:train#1", 20 * G, 600.0, "job"},
                                {"chat", 8 * G, 12.0, "busy"},
                                {"code", 4 * G, std::nullopt, "loading"}};
    const auto e = memory_eta(10 * G, 3 * G, h);  // needs 7 more: chat's 8 at 12 s
    ASSERT_TRUE(e.seconds);
    EXPECT_DOUBLE_EQ(*e.seconds, 12.0);
    EXPECT_DOUBLE_EQ(*memory_eta(20 * G, 3 * G, h).seconds, 600.0) << "chat and the job";
    const auto unknown = memory_eta(40 * G, 3 * G, h);
    EXPECT_FALSE(unknown.seconds);
    EXPECT_NE(unknown.basis.find("code"), std::string::npos) << unknown.basis;
    EXPECT_DOUBLE_EQ(*memory_eta(G, 3 * G, h).seconds, 0.0);
    const nlohmann::json j = unknown;
    EXPECT_TRUE(j["eta_s"].is_null());
}
