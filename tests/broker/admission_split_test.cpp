// Admission over several GPUs (issue 14): one device when the model fits one, else a split over the fewest
// devices that all have room now (or after evictions), refused with each device's numbers when no split can
// ever fit. Pure logic over a ledger of fake-sized devices.
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "broker/admission.hpp"

using namespace loch;
using namespace loch::broker;

namespace {

Ledger gpus(std::initializer_list<std::pair<const char*, std::uint64_t>> devices) {
    Ledger l;
    for (const auto& [id, total] : devices) {
        DeviceLimits d;
        d.id = id;
        d.total = {total, Source::measured, ""};
        l.set_device(d);
    }
    return l;
}

Need on(const std::string& device, std::uint64_t bytes) {
    Need n;
    n.device = device;
    n.bytes = bytes;
    n.weights_bytes = bytes * 3 / 4;
    n.kv_bytes = bytes / 4;
    n.ctx = 8192;
    n.layers = 32;
    return n;
}

SplitNeed split(std::vector<Need> parts) {
    return {std::move(parts), "--split-mode layer"};
}

EngineView engine(std::string name, std::string device, std::uint64_t bytes, bool evictable,
                  int priority = 1) {
    EngineView e;
    e.name = std::move(name);
    e.device = std::move(device);
    e.bytes = bytes;
    e.evictable = evictable;
    e.idle_s = 100;
    e.priority = priority;
    e.held_as = evictable ? "" : "busy";
    return e;
}

// A 30 GiB model on two 24 GiB cards: alone on either it never fits; 16 + 14 GiB split over both it does.
AdmissionInput thirty_gib_on_two_cards() {
    AdmissionInput in;
    in.priority = 1;
    in.needs = {on("gpu0", 30 * kGiB), on("gpu1", 30 * kGiB)};
    in.splits = {split({on("gpu0", 16 * kGiB), on("gpu1", 14 * kGiB)})};
    return in;
}

}  // namespace

TEST(AdmissionSplit, OneDeviceWhenTheModelFitsOneEvenIfASplitFitsToo) {
    const Ledger l = gpus({{"gpu0", 24 * kGiB}, {"gpu1", 24 * kGiB}});
    AdmissionInput in;
    in.priority = 1;
    in.needs = {on("gpu0", 10 * kGiB), on("gpu1", 10 * kGiB)};
    in.splits = {split({on("gpu0", 6 * kGiB), on("gpu1", 5 * kGiB)})};
    const auto d = decide(in, l);
    EXPECT_EQ(d.kind, Decision::Kind::start);
    EXPECT_EQ(d.device, "gpu0");
    EXPECT_TRUE(d.devices.empty()) << d.reason;
}

TEST(AdmissionSplit, TooLargeForEitherCardStartsSplitOverBothAndSaysWhy) {
    const Ledger l = gpus({{"gpu0", 24 * kGiB}, {"gpu1", 24 * kGiB}});
    const auto d = decide(thirty_gib_on_two_cards(), l);
    ASSERT_EQ(d.kind, Decision::Kind::start) << d.reason;
    EXPECT_EQ(d.device, "gpu0");  // the main device
    EXPECT_EQ(d.devices, (std::vector<std::string>{"gpu0", "gpu1"}));
    EXPECT_NE(d.reason.find("fits on no single device"), std::string::npos) << d.reason;
    EXPECT_NE(d.reason.find("gpu1 needs 14.00 GiB"), std::string::npos) << d.reason;
    const nlohmann::json j = d;
    EXPECT_EQ(j["devices"], nlohmann::json::array({"gpu0", "gpu1"}));
}

TEST(AdmissionSplit, TheFewestDevicesThatFitNow) {
    const Ledger empty = gpus({{"gpu0", 24 * kGiB}, {"gpu1", 24 * kGiB}, {"gpu2", 24 * kGiB}});
    AdmissionInput in = thirty_gib_on_two_cards();
    in.needs.push_back(on("gpu2", 30 * kGiB));
    in.splits = {split({on("gpu0", 16 * kGiB), on("gpu1", 14 * kGiB)}),
                 split({on("gpu0", 11 * kGiB), on("gpu1", 10 * kGiB), on("gpu2", 10 * kGiB)})};
    EXPECT_EQ(decide(in, empty).devices.size(), 2u);
    Ledger l = empty;
    l.reserve("gpu1", "busy", {12 * kGiB, Source::measured, ""});
    in.engines = {engine("busy", "gpu1", 12 * kGiB, false)};  // gpu1 has 12 GiB free: the pair does not fit
    const auto d = decide(in, l);
    ASSERT_EQ(d.kind, Decision::Kind::start) << d.reason;
    EXPECT_EQ(d.devices, (std::vector<std::string>{"gpu0", "gpu1", "gpu2"}));
}

TEST(AdmissionSplit, EvictsOnEveryDeviceOfTheSplitAndCountsASplitVictimOnBoth) {
    const Ledger base = gpus({{"gpu0", 24 * kGiB}, {"gpu1", 24 * kGiB}});
    Ledger l = base;
    l.reserve("gpu0", "old-split", {12 * kGiB, Source::measured, ""});
    l.reserve("gpu1", "old-split", {12 * kGiB, Source::measured, ""});
    l.reserve("gpu1", "small", {2 * kGiB, Source::measured, ""});
    AdmissionInput in = thirty_gib_on_two_cards();
    auto old = engine("old-split", "gpu0", 12 * kGiB, true);
    old.also_on = {{"gpu1", 12 * kGiB}};
    in.engines = {old, engine("small", "gpu1", 2 * kGiB, true)};
    const auto d = decide(in, l);
    ASSERT_EQ(d.kind, Decision::Kind::evict_then_start) << d.reason;
    EXPECT_EQ(d.devices, (std::vector<std::string>{"gpu0", "gpu1"}));
    // Stopping the old split frees 12 GiB on each card: gpu1 then has 22 GiB free, enough for 14 — the small
    // engine stays.
    EXPECT_EQ(d.victims, (std::vector<std::string>{"old-split"}));
    EXPECT_EQ(d.freed_bytes, 24 * kGiB);
}

// (Rule 2b's break-even aside: the more important engine was idle for less than twice its reload.)
TEST(AdmissionSplit, NeverEvictsHigherPriorityForASplit) {
    Ledger l = gpus({{"gpu0", 24 * kGiB}, {"gpu1", 24 * kGiB}});
    l.reserve("gpu1", "chat", {20 * kGiB, Source::measured, ""});
    AdmissionInput in = thirty_gib_on_two_cards();
    in.engines = {engine("chat", "gpu1", 20 * kGiB, true, /*priority=*/2)};
    in.engines[0].load_s = 60;
    const auto d = decide(in, l);
    EXPECT_EQ(d.kind, Decision::Kind::wait) << d.reason;
    EXPECT_NE(d.reason.find("split over gpu0 + gpu1"), std::string::npos) << d.reason;
    EXPECT_NE(d.reason.find("gpu1 needs 14.00 GiB (4.00 GiB free)"), std::string::npos) << d.reason;
}

TEST(AdmissionSplit, ASingleDeviceWaitingOnlyForALoadInFlightIsPreferredToASplitNow) {
    const Ledger l = gpus({{"gpu0", 24 * kGiB}, {"gpu1", 24 * kGiB}});
    AdmissionInput in;
    in.priority = 1;
    in.needs = {on("gpu0", 20 * kGiB), on("gpu1", 20 * kGiB)};
    in.splits = {split({on("gpu0", 11 * kGiB), on("gpu1", 10 * kGiB)})};
    in.devices_loading = {"gpu0", "gpu1"};
    EXPECT_EQ(decide(in, l).kind, Decision::Kind::wait);
    in.devices_loading = {"gpu0"};  // gpu1 is free and takes it whole
    const auto d = decide(in, l);
    EXPECT_EQ(d.kind, Decision::Kind::start);
    EXPECT_EQ(d.device, "gpu1");
    EXPECT_TRUE(d.devices.empty());
}

TEST(AdmissionSplit, RefusedWhenNoSplitCanEverFitWithEachDevicesNumbers) {
    const Ledger l = gpus({{"gpu0", 24 * kGiB}, {"gpu1", 24 * kGiB}});
    AdmissionInput in;
    in.priority = 1;
    in.needs = {on("gpu0", 60 * kGiB), on("gpu1", 60 * kGiB)};
    in.splits = {split({on("gpu0", 31 * kGiB), on("gpu1", 29 * kGiB)})};
    const auto d = decide(in, l);
    ASSERT_EQ(d.kind, Decision::Kind::refuse) << d.reason;
    ASSERT_EQ(d.refusal.split.size(), 2u);
    EXPECT_EQ(d.refusal.split[0].device, "gpu0");
    EXPECT_EQ(d.refusal.split[0].need, 31 * kGiB);
    EXPECT_EQ(d.refusal.split[0].capacity, 24 * kGiB);
    EXPECT_EQ(d.refusal.split[1].device, "gpu1");
    EXPECT_EQ(d.refusal.split[1].free, 24 * kGiB);
    EXPECT_NE(d.reason.find("split over gpu0 + gpu1"), std::string::npos) << d.reason;
    EXPECT_NE(d.reason.find("gpu1 needs 29.00 GiB, at most 24.00 GiB can be free"), std::string::npos)
        << d.reason;
    const nlohmann::json j = d;
    EXPECT_EQ(j["split"][0]["need_bytes"], 31 * kGiB);
    // One part fits, the other never does: still refused (a split needs every part at once).
    in.splits = {split({on("gpu0", 10 * kGiB), on("gpu1", 50 * kGiB)})};
    EXPECT_EQ(decide(in, l).kind, Decision::Kind::refuse);
}

TEST(AdmissionSplit, ASplitOnADeviceLochDoesNotKnowIsNeverStarted) {
    const Ledger l = gpus({{"gpu0", 24 * kGiB}});
    AdmissionInput in;
    in.priority = 1;
    in.needs = {on("gpu0", 30 * kGiB)};
    in.splits = {split({on("gpu0", 16 * kGiB), on("gpu9", 14 * kGiB)})};
    EXPECT_EQ(decide(in, l).kind, Decision::Kind::refuse);
}
