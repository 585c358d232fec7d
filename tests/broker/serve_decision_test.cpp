// The serve decision's rules as effects (broker/serve_decision.hpp): nothing starts, nothing waits; each
// test sets what the broker would answer and reads the effects it would carry out.
#include <gtest/gtest.h>

#include "broker/serve_decision.hpp"

using namespace loch;
using namespace loch::broker;

namespace {

// The broker's answers, set by each test; counts what was asked (a rule that needs no answer asks nothing).
struct Answers final : ServeQuestions {
    std::optional<std::string> turn;
    bool exclusive = true;
    std::optional<std::string> holder;
    std::optional<Error> never_fits;
    bool fits_now = true;
    Decision for_request_memory;
    std::optional<Error> no_build;
    OtherEngines others;
    Admitted admitted;
    bool batch_victims = false;
    DeviceAdvice advice;
    int admissions = 0;

    std::optional<std::string> turn_wait() override { return turn; }
    bool exclusive_ok() override { return exclusive; }
    std::optional<std::string> exclusive_holder() override { return holder; }
    std::optional<Error> request_memory_never_fits() override { return never_fits; }
    bool request_memory_fits_now() override { return fits_now; }
    Decision admit_request_memory() override { return for_request_memory; }
    std::optional<Error> no_build_reaches() override { return no_build; }
    OtherEngines other_engines() override { return others; }
    Admitted admit() override {
        ++admissions;
        return admitted;
    }
    bool evicts_batch_work(const std::vector<std::string>&) override { return batch_victims; }
    DeviceAdvice device_advice(const std::string&) override { return advice; }
};

ServeFacts ready_model() {
    ServeFacts f;
    f.model = "chat";
    f.state = ModelState::ready;
    f.device = "gpu0";
    f.slots = 2;
    f.active = 0;
    f.planned = true;
    f.footprint_source = "engine-dry-run";
    return f;
}

ServeFacts stopped_model() {
    ServeFacts f = ready_model();
    f.state = ModelState::stopped;
    return f;
}

Decision decision(Decision::Kind kind, std::string device = "gpu0") {
    Decision d;
    d.kind = kind;
    d.device = device;
    d.devices = {device};
    d.reason = "the reason";
    return d;
}

// The i-th effect, which must be a T (a wrong kind throws: the test fails there).
template <class T>
const T& at(const ServeEffects& effects, std::size_t i) {
    return std::get<T>(effects.at(i));
}

const std::string& wait_reason(const ServeEffects& effects) {
    for (const auto& e : effects)
        if (const auto* w = std::get_if<effect::Wait>(&e)) return w->reason;
    static const std::string none = "(no wait)";
    return none;
}

// A picture's compute beside the engine: the request's own memory.
engines::RequestCost image_compute() {
    engines::RequestCost image;
    image.bytes = 1 << 30;
    image.why = "a 1024x1024 image's compute";
    return image;
}

bool has_refusal(const ServeEffects& effects) {
    return std::any_of(effects.begin(), effects.end(),
                       [](const ServeEffect& e) { return std::holds_alternative<effect::Refuse>(e); });
}

}  // namespace

TEST(ServeDecision, AReadyEngineWithAFreeSlotGrantsWithoutAskingAdmission) {
    Answers ask;
    const auto effects = decide_serve(ready_model(), ask);
    ASSERT_EQ(effects.size(), 1u);
    at<effect::Grant>(effects, 0);
    EXPECT_EQ(ask.admissions, 0);
}

TEST(ServeDecision, AllSlotsBusyWaitsSayingHowMany) {
    Answers ask;
    auto f = ready_model();
    f.active = 2;
    const auto effects = decide_serve(f, ask);
    ASSERT_EQ(effects.size(), 1u);
    EXPECT_EQ(at<effect::Wait>(effects, 0).reason, "all 2 slot(s) busy");
}

TEST(ServeDecision, TheCpusTurnAndAnExclusiveHolderAreTheWaitsReason) {
    Answers ask;
    ask.turn = "the CPU's 2 cores are taken by 'batch'";
    EXPECT_EQ(wait_reason(decide_serve(ready_model(), ask)), "the CPU's 2 cores are taken by 'batch'");
    ask.turn.reset();
    ask.exclusive = false;
    ask.holder = "flux";
    EXPECT_EQ(wait_reason(decide_serve(ready_model(), ask)), "gpu0 is held exclusively by 'flux'");
    ask.holder.reset();
    EXPECT_EQ(wait_reason(decide_serve(ready_model(), ask)),
              "exclusive: waiting for the other models' requests on gpu0");
}

TEST(ServeDecision, BatchWorkYieldsToAPersonInsteadOfTakingAFreeSlot) {
    Answers ask;
    auto f = ready_model();
    f.priority = config::Priority::batch;
    f.yields_to = "'chat' runs an interactive request on gpu0";
    const auto effects = decide_serve(f, ask);
    ASSERT_EQ(effects.size(), 1u);
    EXPECT_EQ(at<effect::Wait>(effects, 0).reason,
              "batch work yields to interactive work: 'chat' runs an interactive request on gpu0 (it goes "
              "once that "
              "is done, or after waiting aging)");
}

TEST(ServeDecision, RequestMemoryThatFitsIsBookedBeforeTheGrant) {
    Answers ask;
    const auto image = image_compute();
    auto f = ready_model();
    f.request_memory = &image;
    const auto effects = decide_serve(f, ask);
    ASSERT_EQ(effects.size(), 2u);
    at<effect::BookRequestMemory>(effects, 0);
    at<effect::Grant>(effects, 1);
}

TEST(ServeDecision, RequestMemoryWithoutRoomEvictsIdleEnginesOrWaitsForRoom) {
    Answers ask;
    const auto image = image_compute();
    auto f = ready_model();
    f.request_memory = &image;
    ask.fits_now = false;
    ask.for_request_memory = decision(Decision::Kind::evict_then_start);
    ask.for_request_memory.victims = {"old"};
    auto effects = decide_serve(f, ask);
    ASSERT_EQ(effects.size(), 3u);
    EXPECT_EQ(at<effect::Wait>(effects, 0).reason,
              "evicting old for this request's a 1024x1024 image's compute: the reason");
    EXPECT_EQ(at<effect::Note>(effects, 1).kind, "admission");
    EXPECT_EQ(at<effect::Evict>(effects, 2).victims, std::vector<std::string>{"old"});
    EXPECT_EQ(at<effect::Evict>(effects, 2).why, "evicted to make room for a request to 'chat'");

    ask.for_request_memory = decision(Decision::Kind::wait);
    effects = decide_serve(f, ask);
    ASSERT_EQ(effects.size(), 1u);
    EXPECT_TRUE(at<effect::Wait>(effects, 0).for_room);
    EXPECT_FALSE(has_refusal(effects));
}

TEST(ServeDecision, RequestMemoryThatCanNeverFitIsNotedAndRefused) {
    Answers ask;
    engines::RequestCost image;
    image.bytes = 100ull << 30;
    auto f = ready_model();
    f.request_memory = &image;
    ask.never_fits = Error(ErrorKind::insufficient_memory, "too big", {{"request_bytes", 42}});
    const auto effects = decide_serve(f, ask);
    ASSERT_EQ(effects.size(), 2u);
    EXPECT_TRUE(at<effect::Note>(effects, 0).warn);
    EXPECT_EQ(at<effect::Note>(effects, 0).extra["request_bytes"], 42);
    EXPECT_EQ(at<effect::Refuse>(effects, 1).error.kind(), ErrorKind::insufficient_memory);
}

TEST(ServeDecision, LoadingAndStoppingWaitSayingForWhat) {
    Answers ask;
    auto f = ready_model();
    f.state = ModelState::loading;
    f.loading_for = std::chrono::seconds(3);
    f.last_load_s = 2.5;
    EXPECT_EQ(wait_reason(decide_serve(f, ask)), "loading on gpu0 for 3 s (the last load took 2.5 s)");
    f.state = ModelState::stopping;
    f.stop_reason = "idle past keep_alive";
    EXPECT_EQ(wait_reason(decide_serve(f, ask)),
              "stopping (idle past keep_alive); starts again once it has exited");
    EXPECT_EQ(ask.admissions, 0);
}

TEST(ServeDecision, ShuttingDownAndQuarantineRefuseBeforeAnythingElse) {
    Answers ask;
    auto f = ready_model();
    f.shutting_down = true;
    auto effects = decide_serve(f, ask);
    ASSERT_EQ(effects.size(), 1u);
    EXPECT_EQ(at<effect::Refuse>(effects, 0).error.kind(), ErrorKind::shutting_down);
    f.shutting_down = false;
    f.quarantined = Error(ErrorKind::quarantined, "crashed 3 times");
    effects = decide_serve(f, ask);
    ASSERT_EQ(effects.size(), 1u);
    EXPECT_EQ(at<effect::Refuse>(effects, 0).error.kind(), ErrorKind::quarantined);
}

TEST(ServeDecision, AColdModelWaitsOutItsBackoffAndItsPlanBeforeAdmission) {
    Answers ask;
    auto f = stopped_model();
    f.backoff = std::chrono::milliseconds(1500);
    EXPECT_EQ(wait_reason(decide_serve(f, ask)), "restart backoff after a failure: starts in 2 s");
    f.backoff = {};
    f.planned = false;
    EXPECT_EQ(wait_reason(decide_serve(f, ask)), "planning its memory footprint");
    EXPECT_EQ(ask.admissions, 0);
    f.planned = true;
    ask.no_build = Error(ErrorKind::insufficient_memory, "no engine build reaches gpu0");
    EXPECT_TRUE(has_refusal(decide_serve(f, ask)));
    EXPECT_EQ(ask.admissions, 0);
}

TEST(ServeDecision, AdmissionsStartIsAColdStartThere) {
    Answers ask;
    ask.admitted.decision = decision(Decision::Kind::start, "gpu1");
    const auto effects = decide_serve(stopped_model(), ask);
    ASSERT_EQ(effects.size(), 2u);
    EXPECT_EQ(at<effect::Wait>(effects, 0).reason, "cold start on gpu1: the reason");
    EXPECT_EQ(at<effect::Start>(effects, 1).device, "gpu1");
}

TEST(ServeDecision, ASplitStartCarriesTheSplitAdmissionChose) {
    Answers ask;
    SplitNeed two, three;
    two.parts.resize(2), two.parts[0].device = "gpu0", two.parts[1].device = "gpu1", two.shares = {3, 2};
    three.parts.resize(3), three.parts[0].device = "gpu0", three.parts[1].device = "gpu1",
                           three.parts[2].device = "gpu2";
    ask.admitted.input.splits = {two, three};
    ask.admitted.decision = decision(Decision::Kind::start);
    ask.admitted.decision.devices = {"gpu0", "gpu1"};
    const auto effects = decide_serve(stopped_model(), ask);
    ASSERT_EQ(effects.size(), 2u);
    EXPECT_EQ(at<effect::Wait>(effects, 0).reason, "cold start split over gpu0 + gpu1: the reason");
    EXPECT_EQ(at<effect::StartSplit>(effects, 1).split.shares, (std::vector<float>{3, 2}));
}

TEST(ServeDecision, AnAsleepEngineWakesWhereItSleepsAndRestartsWhereItFitsInstead) {
    Answers ask;
    auto f = stopped_model();
    f.state = ModelState::asleep;
    ask.admitted.decision = decision(Decision::Kind::start, "gpu0");
    auto effects = decide_serve(f, ask);
    ASSERT_EQ(effects.size(), 2u);
    at<effect::Wake>(effects, 1);
    ask.admitted.decision = decision(Decision::Kind::start, "gpu1");
    effects = decide_serve(f, ask);
    ASSERT_EQ(effects.size(), 2u);
    EXPECT_EQ(at<effect::Restart>(effects, 1).why, "fits on gpu1 instead: restarted there");
}

TEST(ServeDecision, EvictThenStartNotesEvictsLendsFromBatchAndReadsAhead) {
    Answers ask;
    ask.admitted.decision = decision(Decision::Kind::evict_then_start);
    ask.admitted.decision.victims = {"captioner", "coder"};
    ask.batch_victims = true;
    const auto effects = decide_serve(stopped_model(), ask);
    ASSERT_EQ(effects.size(), 4u);
    EXPECT_EQ(at<effect::Wait>(effects, 0).reason, "evicting captioner, coder to start on gpu0: the reason");
    EXPECT_EQ(at<effect::Note>(effects, 1).extra["victims"], nlohmann::json({"captioner", "coder"}));
    const auto& evict = at<effect::Evict>(effects, 2);
    EXPECT_EQ(evict.victims, (std::vector<std::string>{"captioner", "coder"}));
    EXPECT_TRUE(evict.borrowed_from_batch);
    EXPECT_EQ(at<effect::ReadAhead>(effects, 3).device, "gpu0");
}

TEST(ServeDecision, BatchWorkThatWouldStartAnEngineYieldsButReadsItsFilesAhead) {
    Answers ask;
    auto f = stopped_model();
    f.priority = config::Priority::batch;
    f.yields_to = "'chat' waits for a load on gpu0";
    ask.admitted.decision = decision(Decision::Kind::start);
    const auto effects = decide_serve(f, ask);
    ASSERT_EQ(effects.size(), 2u);
    EXPECT_EQ(at<effect::ReadAhead>(effects, 0).why, "batch work yields to it");
    EXPECT_NE(at<effect::Wait>(effects, 1).reason.find("yields"), std::string::npos);
}

TEST(ServeDecision, ARefusalHasTheNumbersTheVulkanHeapAndTheDevicesAdvice) {
    Answers ask;
    Decision d = decision(Decision::Kind::refuse);
    d.reason = "needs 80 GiB, the device has 64 GiB";
    d.refusal.device = "vulkan:0";
    d.refusal.need = 80ull << 30;
    d.refusal.capacity = 64ull << 30;
    d.refusal.largest_free = 60ull << 30;
    d.refusal.would_help = {"a smaller quantization"};
    ask.admitted.decision = d;
    ask.advice.vulkan_heap = 64ull << 30;
    ask.advice.without_vulkan_heap = 110ull << 30;
    ask.advice.advice = "raise the GTT size (amdgpu.gttsize)";
    const auto effects = decide_serve(stopped_model(), ask);
    ASSERT_EQ(effects.size(), 2u);
    EXPECT_EQ(at<effect::Note>(effects, 0).kind, "refused");
    const auto& e = at<effect::Refuse>(effects, 1).error;
    EXPECT_EQ(e.kind(), ErrorKind::insufficient_memory);
    EXPECT_EQ(e.details()["need_bytes"], 80ull << 30);
    EXPECT_EQ(e.details()["footprint_source"], "engine-dry-run");
    EXPECT_EQ(e.details()["would_help"].size(), 3u) << e.details();
    const std::string what = e.what();
    EXPECT_NE(what.find("model 'chat' does not fit: needs 80 GiB"), std::string::npos) << what;
    EXPECT_NE(what.find("ROCm build (devices.vulkan:0.backend: rocm)"), std::string::npos) << what;
    EXPECT_NE(what.find("amdgpu.gttsize"), std::string::npos) << what;
}

TEST(ServeDecision, AWaitForRoomReadsTheFilesAheadForTheFirstAllowedDevice) {
    Answers ask;
    ask.admitted.decision = decision(Decision::Kind::wait);
    Need n;
    n.device = "gpu1";
    ask.admitted.input.needs = {n};
    const auto effects = decide_serve(stopped_model(), ask);
    ASSERT_EQ(effects.size(), 2u);
    EXPECT_TRUE(at<effect::Wait>(effects, 0).for_room);
    EXPECT_EQ(at<effect::ReadAhead>(effects, 1).device, "gpu1");
}

TEST(ServeDecision, OneModelAtATimeStopsTheIdleOthersAndWaitsForTheBusyOnes) {
    Answers ask;
    auto f = stopped_model();
    f.one_model_at_a_time = true;
    ask.others.idle = {"a"};
    ask.others.busy = {"b"};
    auto effects = decide_serve(f, ask);
    ASSERT_EQ(effects.size(), 2u);
    EXPECT_EQ(at<effect::Wait>(effects, 0).reason, "one model at a time: waiting for a to stop");
    EXPECT_EQ(at<effect::Evict>(effects, 1).victims, std::vector<std::string>{"a"});
    ask.others.idle.clear();
    effects = decide_serve(f, ask);
    ASSERT_EQ(effects.size(), 1u);
    EXPECT_EQ(wait_reason(effects), "one model at a time: waiting for b to stop");
    EXPECT_EQ(ask.admissions, 0);
    ask.others.busy.clear();
    ask.admitted.decision = decision(Decision::Kind::start);
    effects = decide_serve(f, ask);
    EXPECT_EQ(ask.admissions, 1);
    at<effect::Start>(effects, 1);
}
