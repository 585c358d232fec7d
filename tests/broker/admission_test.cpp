// Admission decisions and victim choice: pure logic over a ledger snapshot.
#include <gtest/gtest.h>

#include "broker/admission.hpp"

using namespace loch;
using namespace loch::broker;

namespace {

Ledger ledger_with(std::uint64_t total) {
    Ledger l;
    DeviceLimits d;
    d.id = "gpu0";
    d.total = {total, Source::measured, ""};
    l.set_device(d);
    return l;
}

Need need(std::uint64_t bytes) {
    Need n;
    n.device = "gpu0";
    n.bytes = bytes;
    n.weights_bytes = bytes * 3 / 4;
    n.kv_bytes = bytes / 4;
    n.ctx = 8192;
    n.slots = 2;
    n.layers = 32;
    return n;
}

EngineView engine(std::string name, std::uint64_t bytes, bool evictable, double idle_s, double load_s,
                  int priority = 1) {
    EngineView e;
    e.name = std::move(name);
    e.device = "gpu0";
    e.bytes = bytes;
    e.evictable = evictable;
    e.idle_s = idle_s;
    e.load_s = load_s;
    e.priority = priority;
    return e;
}

}  // namespace

TEST(Admission, StartsWhenItFits) {
    Ledger l = ledger_with(10 * kGiB);
    AdmissionInput in{{need(4 * kGiB)}, 1, {}, {}};
    auto d = decide(in, l);
    EXPECT_EQ(d.kind, Decision::Kind::start);
    EXPECT_EQ(d.device, "gpu0");
}

TEST(Admission, WaitsWhileAnotherLoadIsInFlightOnTheDevice) {
    Ledger l = ledger_with(10 * kGiB);
    AdmissionInput in{{need(4 * kGiB)}, 1, {}, {"gpu0"}};
    EXPECT_EQ(decide(in, l).kind, Decision::Kind::wait);
}

TEST(Admission, EvictsTheCheapestToReloadIdleEngines) {
    Ledger l = ledger_with(10 * kGiB);
    l.reserve("gpu0", "slow", {3 * kGiB, Source::measured, ""});
    l.reserve("gpu0", "quick", {3 * kGiB, Source::measured, ""});
    l.reserve("gpu0", "busy", {3 * kGiB, Source::measured, ""});
    AdmissionInput in{{need(4 * kGiB)},
                      1,
                      {engine("slow", 3 * kGiB, true, 100, 60), engine("quick", 3 * kGiB, true, 100, 2),
                       engine("busy", 3 * kGiB, false, 0, 1)},
                      {}};
    auto d = decide(in, l);  // free 1 GiB; one 3 GiB victim is enough
    ASSERT_EQ(d.kind, Decision::Kind::evict_then_start);
    ASSERT_EQ(d.victims.size(), 1u);
    EXPECT_EQ(d.victims[0], "quick");
    EXPECT_EQ(d.freed_bytes, 3 * kGiB);
}

// Rule 2b: a lower-priority request waits for a more important idle engine only until it has been idle twice
// its reload time (then the person's swap costs less than the batch's wait), and the wait says when.
TEST(Admission, EvictsHigherPriorityOnlyOnceIdleTwiceItsReload) {
    Ledger l = ledger_with(10 * kGiB);
    l.reserve("gpu0", "vip", {8 * kGiB, Source::measured, ""});
    AdmissionInput in{{need(4 * kGiB)}, 0, {engine("vip", 8 * kGiB, true, 7.9, 4, /*priority=*/1)}, {}};
    const auto d = decide(in, l);
    EXPECT_EQ(d.kind, Decision::Kind::wait);
    EXPECT_NE(d.reason.find("vip 8.00 GiB (more important, idle 7.9 s: it goes for this at 8.0 s"),
              std::string::npos)
        << d.reason;
    in.engines[0].idle_s = 8;
    EXPECT_EQ(decide(in, l).kind, Decision::Kind::evict_then_start);
    in.engines[0].idle_s = 0;
    in.priority = 1;
    EXPECT_EQ(decide(in, l).kind, Decision::Kind::evict_then_start);
}

TEST(Admission, RefusesAtOnceWhatCannotFitOnAnEmptyDeviceWithNumbers) {
    Ledger l = ledger_with(10 * kGiB);
    l.reserve("gpu0", "other", {2 * kGiB, Source::measured, ""});
    AdmissionInput in{{need(16 * kGiB)}, 1, {engine("other", 2 * kGiB, true, 5, 1)}, {}};
    auto d = decide(in, l);
    ASSERT_EQ(d.kind, Decision::Kind::refuse);
    EXPECT_EQ(d.refusal.need, 16 * kGiB);
    EXPECT_EQ(d.refusal.capacity, 10 * kGiB);
    EXPECT_EQ(d.refusal.largest_free, 8 * kGiB);
    ASSERT_FALSE(d.refusal.would_help.empty());
    bool mentions_context = false, mentions_quant = false, mentions_cpu = false;
    for (const auto& h : d.refusal.would_help) {
        mentions_context |= h.find("context") != std::string::npos;
        mentions_quant |= h.find("quantization") != std::string::npos;
        mentions_cpu |= h.find("CPU layers") != std::string::npos;
    }
    EXPECT_TRUE(mentions_quant);
    EXPECT_TRUE(mentions_cpu);
    EXPECT_FALSE(
        mentions_context);  // the weights alone (12 GiB) exceed 10 GiB: a smaller context cannot help
}

TEST(Admission, SuggestsAContextThatFits) {
    Need n = need(12 * kGiB);  // 9 GiB weights + 3 GiB KV for 8192 tokens
    auto help = what_would_help(n, 10 * kGiB);
    ASSERT_FALSE(help.empty());
    // 1 GiB left for KV at 3 GiB / 8192 tokens → 2730 tokens.
    EXPECT_NE(help[0].find("2730"), std::string::npos) << help[0];
}

TEST(Admission, WaitsWhenBusyEnginesHoldTheMemory) {
    Ledger l = ledger_with(10 * kGiB);
    l.reserve("gpu0", "busy", {8 * kGiB, Source::measured, ""});
    AdmissionInput in{{need(4 * kGiB)}, 1, {engine("busy", 8 * kGiB, false, 0, 1)}, {}};
    in.engines[0].held_as = "busy";
    const auto d = decide(in, l);
    EXPECT_EQ(d.kind, Decision::Kind::wait);
    // The queue's reason names the shortfall, the device and who holds it (and why it stays).
    EXPECT_EQ(d.reason,
              "waiting for 2.00 GiB on gpu0 (2.00 GiB free, needs 4.00 GiB): held by busy 8.00 GiB (busy)")
        << d.reason;
}

TEST(Admission, WaitsForEnginesStoppingOnTheDeviceWhenTheyFreeEnoughInsteadOfStoppingMore) {
    Ledger l = ledger_with(10 * kGiB);
    l.reserve("gpu0", "leaving", {4 * kGiB, Source::measured, ""});
    l.reserve("gpu0", "idle", {4 * kGiB, Source::measured, ""});
    AdmissionInput in{{need(3 * kGiB)},
                      1,
                      {engine("leaving", 4 * kGiB, false, 0, 1), engine("idle", 4 * kGiB, true, 100, 1)},
                      {}};
    in.engines[0].stopping = true;
    in.engines[0].held_as = "stopping";
    auto d = decide(in, l);  // 2 GiB free + 4 GiB on its way ≥ 3 GiB
    EXPECT_EQ(d.kind, Decision::Kind::wait) << d.reason;
    EXPECT_NE(d.reason.find("leaving"), std::string::npos) << d.reason;
    // What stops frees too little: the idle one goes as well.
    Ledger less = ledger_with(10 * kGiB);
    less.reserve("gpu0", "leaving", {1 * kGiB, Source::measured, ""});
    less.reserve("gpu0", "idle", {4 * kGiB, Source::measured, ""});
    in.engines[0].bytes = 1 * kGiB;
    in.needs = {need(7 * kGiB)};  // 5 GiB free + 1 GiB on its way
    d = decide(in, less);
    ASSERT_EQ(d.kind, Decision::Kind::evict_then_start) << d.reason;
    EXPECT_EQ(d.victims, std::vector<std::string>{"idle"});
}

TEST(Admission, TakesTheSecondDeviceWhenTheFirstIsFull) {
    Ledger l = ledger_with(10 * kGiB);
    DeviceLimits d2;
    d2.id = "gpu1";
    d2.total = {10 * kGiB, Source::measured, ""};
    l.set_device(d2);
    l.reserve("gpu0", "busy", {8 * kGiB, Source::measured, ""});
    Need a = need(4 * kGiB), b = need(4 * kGiB);
    b.device = "gpu1";
    AdmissionInput in{{a, b}, 1, {engine("busy", 8 * kGiB, false, 0, 1)}, {}};
    auto d = decide(in, l);
    EXPECT_EQ(d.kind, Decision::Kind::start);
    EXPECT_EQ(d.device, "gpu1");
}

TEST(VictimScore, IdleLongerAndCheaperToReloadScoresHigher) {
    EXPECT_GT(victim_score(engine("a", 1, true, 100, 1)), victim_score(engine("b", 1, true, 10, 1)));
    EXPECT_GT(victim_score(engine("a", 1, true, 100, 1)), victim_score(engine("b", 1, true, 100, 10)));
    auto heavy = engine("c", 1, true, 100, 1);
    heavy.weight = 5;
    EXPECT_GT(victim_score(engine("a", 1, true, 100, 1)), victim_score(heavy));
}

// Issue 8, item 7: model C is loaded and idle but uses more than its reservation (the probe shows the rest
// as "outside"); a model that fits the empty card must evict C, not wait until max_wait.
TEST(Admission, EvictsForAModelThatFitsTheEmptyDeviceEvenWhenTheNumbersSayOtherwise) {
    Ledger l = ledger_with(80 * kGiB);
    l.reserve("gpu0", "C", {30 * kGiB, Source::measured, "log"});
    l.mark_loaded("gpu0", "C");
    l.observe_used("gpu0", 45 * kGiB);  // C really holds 45: 15 GiB look like someone else's
    AdmissionInput in{{need(60 * kGiB)}, 1, {engine("C", 30 * kGiB, true, 100, 5)}, {}};
    // By the numbers: free 80 - 15 - 30 = 35, + 30 from C = 65 ≥ 60 → plain eviction works here...
    EXPECT_EQ(decide(in, l).kind, Decision::Kind::evict_then_start);
    // ...and with C's real use even larger (outside 40 GiB), only the empty-device rule evicts it.
    l.observe_used("gpu0", 70 * kGiB);
    const auto d = decide(in, l);
    ASSERT_EQ(d.kind, Decision::Kind::evict_then_start) << d.reason;
    EXPECT_EQ(d.victims, std::vector<std::string>{"C"});
    EXPECT_NE(d.reason.find("empty"), std::string::npos) << d.reason;
    // A busy (not evictable) engine that leaves too little even on an otherwise empty device: no eviction.
    AdmissionInput busy{{need(60 * kGiB)}, 1, {engine("C", 30 * kGiB, false, 0, 5)}, {}};
    EXPECT_NE(decide(busy, l).kind, Decision::Kind::evict_then_start);
}

// Issue 8, item 6: what exceeds total − driver reservation − reserve − others' use is refused at once, with
// each term in the answer.
TEST(Admission, RefusesAtOnceWhatCanNeverBeFreeWithTheNumbers) {
    Ledger l;
    DeviceLimits d;
    d.id = "gpu0";
    d.total = {140 * kGiB, Source::measured, "NVML"};
    d.driver_reserved = {615 * kMiB, Source::measured, "NVML v2 reserved"};
    l.set_device(d);
    // Between total and what can ever be free: refused, not queued.
    AdmissionInput in{{need(140 * kGiB - 300 * kMiB)}, 1, {}, {}};
    auto dec = decide(in, l);
    ASSERT_EQ(dec.kind, Decision::Kind::refuse) << dec.reason;
    EXPECT_EQ(dec.refusal.capacity, 140 * kGiB - 615 * kMiB);
    EXPECT_EQ(dec.refusal.driver_reserved, 615 * kMiB);
    EXPECT_NE(dec.reason.find("driver reserves"), std::string::npos) << dec.reason;
    // Just under: started.
    AdmissionInput under{{need(140 * kGiB - 700 * kMiB)}, 1, {}, {}};
    EXPECT_EQ(decide(under, l).kind, Decision::Kind::start);
    // Another program's use counts while it lasts.
    l.observe_used("gpu0", 2 * kGiB);
    const auto o = decide(under, l);
    ASSERT_EQ(o.kind, Decision::Kind::refuse);
    EXPECT_EQ(o.refusal.outside, 2 * kGiB);
}

// A load in flight must not make another model look as if it could never fit (its partial allocation shows
// in the probe before it is marked loaded).
TEST(Admission, ALoadInFlightIsNotCountedAsOthersUseForRefusal) {
    Ledger l = ledger_with(20 * kGiB);
    l.reserve("gpu0", "loading", {8 * kGiB, Source::formula, ""});
    l.observe_used("gpu0", 6 * kGiB);  // part of it is allocated already
    AdmissionInput in{{need(12 * kGiB)}, 1, {}, {"gpu0"}};
    EXPECT_EQ(decide(in, l).kind, Decision::Kind::wait);
}

// People's work displaces batch work (issue 33, found by bench/mixed-trace): an interactive request that
// would otherwise stop the idle chat model people use most waits for the batch work holding the device —
// which yields to it, so its engine is idle within its current items — and then that engine goes first.
TEST(Admission, AnInteractiveRequestWaitsForYieldingBatchWorkRatherThanStoppingAnIdleChatModel) {
    Ledger l = ledger_with(10 * kGiB);
    l.reserve("gpu0", "chat", {3 * kGiB, Source::formula, ""});
    l.reserve("gpu0", "captioner", {6 * kGiB, Source::formula, ""});
    auto chat = engine("chat", 3 * kGiB, true, 60, 1);
    chat.recent_uses = 12;  // a question every ~25 s
    auto captioner = engine("captioner", 6 * kGiB, false, 0, 1, 0);
    captioner.held_as = "busy";
    captioner.batch_only = true;
    AdmissionInput in{{need(4 * kGiB)}, 1, {chat, captioner}, {}};
    in.recent_uses = 2;  // a picture now and then
    auto d = decide(in, l);
    EXPECT_EQ(d.kind, Decision::Kind::wait) << d.reason;
    EXPECT_NE(d.reason.find("captioner"), std::string::npos) << d.reason;
    // Once idle, the batch engine is the victim, not the chat model (less important first).
    in.engines[1].evictable = true;
    in.engines[1].batch_only = false;
    in.engines[1].held_as = "idle";
    d = decide(in, l);
    ASSERT_EQ(d.kind, Decision::Kind::evict_then_start) << d.reason;
    EXPECT_EQ(d.victims, std::vector<std::string>{"captioner"});
    // A busy engine serving people does not yield: the idle chat model is stopped as before.
    in.engines[1].evictable = false;
    in.engines[1].held_as = "busy";
    in.engines[1].priority = 1;
    d = decide(in, l);
    ASSERT_EQ(d.kind, Decision::Kind::evict_then_start) << d.reason;
    EXPECT_EQ(d.victims, std::vector<std::string>{"chat"});
}

// Issue 54's two-people trace: two people, a chat model each, and a batch on a third; two of the three fit.
// Between models people use alike the idle one goes at once, as under Ollama's policy: waiting for the batch
// to drain would add its items to this person's wait and a reload to the batch, and the other person's next
// question finds a cold model either way. Only a model used at least twice as much as this one is kept.
TEST(Admission, BetweenModelsPeopleUseAlikeTheIdleOneGoesRatherThanTheBatchWork) {
    Ledger l = ledger_with(10 * kGiB);
    l.reserve("gpu0", "chat", {3 * kGiB, Source::formula, ""});
    l.reserve("gpu0", "captioner", {6 * kGiB, Source::formula, ""});
    auto chat = engine("chat", 3 * kGiB, true, 5, 1);
    chat.recent_uses = 9;
    auto captioner = engine("captioner", 6 * kGiB, false, 0, 1, 0);
    captioner.held_as = "busy";
    captioner.batch_only = true;
    AdmissionInput in{{need(3 * kGiB)}, 1, {chat, captioner}, {}};
    in.recent_uses = 8;  // chat2: its person asks as often
    auto d = decide(in, l);
    ASSERT_EQ(d.kind, Decision::Kind::evict_then_start) << d.reason;
    EXPECT_EQ(d.victims, std::vector<std::string>{"chat"});
    // Twice as much: kept, and the request waits for the batch work.
    in.engines[0].recent_uses = 16;
    d = decide(in, l);
    EXPECT_EQ(d.kind, Decision::Kind::wait) << d.reason;
    // The batch engine between two items (idle for less than a reload) is not the first victim either: the
    // batch would take its room back at once from the model started here, two swaps for one.
    in.engines[0].recent_uses = 9;
    in.engines[1].evictable = true;
    in.engines[1].batch_only = false;
    in.engines[1].held_as = "idle";
    in.engines[1].idle_s = 0.05;
    d = decide(in, l);
    ASSERT_EQ(d.kind, Decision::Kind::evict_then_start) << d.reason;
    EXPECT_EQ(d.victims, std::vector<std::string>{"chat"});
    // Idle for longer than its reload, it is the batch's engine that goes (less important first).
    in.engines[1].idle_s = 5;
    d = decide(in, l);
    ASSERT_EQ(d.kind, Decision::Kind::evict_then_start) << d.reason;
    EXPECT_EQ(d.victims, std::vector<std::string>{"captioner"});
    in.engines[1] = captioner;
    // A model nobody has asked for lately is never kept that way, whatever the new one's count.
    in.engines[0].recent_uses = 0;
    in.recent_uses = 0;
    d = decide(in, l);
    ASSERT_EQ(d.kind, Decision::Kind::evict_then_start) << d.reason;
    EXPECT_EQ(d.victims, std::vector<std::string>{"chat"});
}
