// The broker's state machine through a fake launcher (tests/broker/fake_launcher.hpp): queueing and aging,
// exclusive locks, the eviction choice, crash backoff and quarantine, start failures, refusals and shutdown
// with waiters — no process is started.
#include <gtest/gtest.h>

#include <boost/asio/co_spawn.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/use_future.hpp>
#include <future>

#include "broker/broker.hpp"
#include "broker/device_source.hpp"
#include "broker/footprint.hpp"
#include "broker_fixture.hpp"
#include "devices/probe.hpp"
#include "devices/sysroot_fixture.hpp"
#include "engines/kinds/command.hpp"
#include "fake_launcher.hpp"

namespace loch::broker {
namespace {

namespace asio = boost::asio;
using namespace std::chrono_literals;
using test_fixture::BrokerTest;
using test_fixture::fast;
using test_fixture::kGpu;

TEST_F(BrokerTest, ARequestBeyondTheSlotsWaitsForTheSlotAndUsesTheSameEngine) {
    add_model("a", 4 * kGiB);
    start(fast());
    auto first = acquire("a");
    ASSERT_TRUE(settle(first));
    Lease held = first.get();
    ASSERT_TRUE(held.valid());
    auto second = acquire("a");
    run_for(100ms);
    EXPECT_NE(second.wait_for(0s), std::future_status::ready) << "one slot: the second request must wait";
    held.release();
    ASSERT_TRUE(settle(second));
    EXPECT_TRUE(second.get().valid());
    EXPECT_EQ(fake->runs.size(), 1u);  // the waiting request did not start a second engine
}

TEST_F(BrokerTest, ACancelledWaiterLeavesTheQueueWithItsErrorAndTheOneBehindItMovesUp) {
    add_model("a", 4 * kGiB);
    start(fast());
    auto first = acquire("a");
    ASSERT_TRUE(settle(first));
    Lease held = first.get();
    const auto queued = [&](const std::string& id) {
        RequestNeeds n;
        n.request_id = id;
        return asio::co_spawn(ioc, broker->acquire("a", n), asio::use_future);
    };
    auto second = queued("req-2");
    auto third = queued("req-3");
    run_for(100ms);
    const auto waiting = [&] {
        auto st = asio::co_spawn(ioc, broker->view().status(), asio::use_future);
        EXPECT_TRUE(settle(st));
        return st.get()["queue"]["waiting"];
    };
    ASSERT_EQ(waiting().size(), 2u);
    EXPECT_EQ(waiting()[0]["request"], "req-2");
    EXPECT_EQ(broker->control().cancel_waiting("no-such", Error(ErrorKind::cancelled, "x")), 0u);
    EXPECT_EQ(broker->control().cancel_waiting("req-2", Error(ErrorKind::cancelled, "cancelled by a test")),
              1u);
    ASSERT_TRUE(settle(second));
    EXPECT_EQ(error_kind(second), ErrorKind::cancelled);
    const auto left = waiting();
    ASSERT_EQ(left.size(), 1u);
    EXPECT_EQ(left[0]["request"], "req-3");
    EXPECT_EQ(left[0]["position"], 1);
    // A granted request is not a waiter any more: nothing for cancel_waiting to end.
    held.release();
    ASSERT_TRUE(settle(third));
    EXPECT_EQ(broker->control().cancel_waiting("req-3", Error(ErrorKind::cancelled, "x")), 0u);
    EXPECT_TRUE(third.get().valid());
}

TEST_F(BrokerTest, AModelThatCanNeverFitIsRefusedAtOnceWithTheNumbersAndNothingStarts) {
    add_model("huge", 20 * kGiB);
    start(fast());
    auto f = acquire("huge");
    ASSERT_TRUE(settle(f, 2s));
    const auto e = error_of(f);
    ASSERT_TRUE(e);
    EXPECT_EQ(e->kind(), ErrorKind::insufficient_memory);
    EXPECT_EQ(e->details()["need_bytes"], 20 * kGiB);
    EXPECT_EQ(e->details()["need_source"], "configured");
    EXPECT_TRUE(fake->runs.empty());
}

TEST_F(BrokerTest, EvictionStopsTheIdleModelThatWasIdleLongest) {
    add_model("a", 4 * kGiB);
    add_model("b", 4 * kGiB);
    add_model("c", 4 * kGiB);  // 10 GiB device: only two fit
    start(fast());
    {
        auto a = acquire("a");
        ASSERT_TRUE(settle(a));
        a.get().release();
    }
    run_for(150ms);  // `a` has been idle longer than `b` will be
    {
        auto b = acquire("b");
        ASSERT_TRUE(settle(b));
        b.get().release();
    }
    run_for(20ms);
    auto c = acquire("c");
    ASSERT_TRUE(settle(c));
    EXPECT_TRUE(c.get().valid());
    ASSERT_EQ(fake->of("a").size(), 1u);
    EXPECT_TRUE(fake->of("a")[0]->ended()) << "the longest-idle model is the one evicted";
    EXPECT_FALSE(fake->of("b")[0]->ended());
}

// Issue 55: an idle broker ticks at idle_tick (30 s by default), yet an idle model still leaves at its
// keep_alive, not up to an idle tick later: the idle tick wakes for the next expiry.
TEST_F(BrokerTest, AnIdleBrokerSleepsLongButWakesForTheNextKeepAliveExpiry) {
    add_model("a", 4 * kGiB);
    cfg.models.back().keep_alive = 1s;
    auto o = fast();
    o.idle_tick = 60s;  // far beyond the test: only the expiry can wake it in time
    start(o);
    {
        auto a = acquire("a");
        ASSERT_TRUE(settle(a));
        a.get().release();
    }
    run_for(800ms);
    ASSERT_EQ(fake->of("a").size(), 1u);
    EXPECT_FALSE(fake->of("a")[0]->ended()) << "stopped before its keep_alive";
    run_for(1200ms);
    EXPECT_TRUE(fake->of("a")[0]->ended()) << "an idle tick of 60 s kept it past its keep_alive";
    // Then nothing is left to expire: it sleeps (at a 20 ms tick it would read the devices ~25 times).
    run_for(300ms);
    const int reads = device_reads;
    run_for(500ms);
    EXPECT_LE(device_reads - reads, 1) << "an idle broker kept reading the devices";
}

// Two idle 4 GiB engines on the 10 GiB device (`a` idle longer) and a 3 GiB model `c`: a and b leave
// 2 GiB, stopping one of them is enough.
struct StoppingEngineTest : BrokerTest {
    void two_idle_engines_and_room_for_c_after_one() {
        add_model("a", 4 * kGiB);
        add_model("b", 4 * kGiB);
        add_model("c", 3 * kGiB);
        start(fast());
        for (const char* name : {"a", "b"}) {
            running(name).release();
            run_for(20ms);
        }
    }
};

TEST_F(StoppingEngineTest, APassWhileAnEvictedEngineIsStillStoppingWaitsForItInsteadOfStoppingAnother) {
    two_idle_engines_and_room_for_c_after_one();
    // A GPU engine takes a moment to exit and hand its memory back (the H200 trace: ~0.1 s).
    for (const auto& r : fake->runs) r->stop_takes = 300ms;
    auto first = acquire("c");
    run_for(50ms);
    auto second = acquire("c");  // another pass of admission while the victim still holds its memory
    ASSERT_TRUE(settle(first));
    Lease held = first.get();
    EXPECT_TRUE(held.valid());
    held.release();
    ASSERT_TRUE(settle(second));
    EXPECT_TRUE(fake->of("a")[0]->ended()) << "the longest-idle engine makes the room";
    EXPECT_EQ(fake->of("b")[0]->stop_calls, 0) << "a second engine stopped for room that was already coming";
    EXPECT_EQ(fake->of("c").size(), 1u);
}

TEST_F(StoppingEngineTest, AnEngineStillStoppingPastStopGraceIsNotWaitedForAndAnotherIsStopped) {
    cfg.stop_grace = 0s;  // the wait for a stopping engine's memory: at most stop_grace + 2 s
    two_idle_engines_and_room_for_c_after_one();
    fake->of("a")[0]->stop_takes = 4s;  // the first victim saves a long conversation to a slow disk
    auto c = acquire("c");
    run_for(1s);
    EXPECT_EQ(fake->of("b")[0]->stop_calls, 0) << "within the bound it waits for a";
    ASSERT_TRUE(settle(c, 5s));
    EXPECT_TRUE(c.get().valid());
    EXPECT_EQ(fake->of("b")[0]->stop_calls, 1) << "past the bound the other idle engine makes the room";
}

TEST_F(BrokerTest, AModelInUseIsNeverEvictedTheNewcomerWaitsInstead) {
    add_model("a", 6 * kGiB);
    add_model("b", 6 * kGiB);
    start(fast());
    auto a = acquire("a");
    ASSERT_TRUE(settle(a));
    Lease held = a.get();
    auto b = acquire("b");
    run_for(150ms);
    EXPECT_NE(b.wait_for(0s), std::future_status::ready);
    EXPECT_FALSE(fake->of("a")[0]->ended());
    held.release();  // idle now: evictable
    ASSERT_TRUE(settle(b));
    EXPECT_TRUE(b.get().valid());
    EXPECT_TRUE(fake->of("a")[0]->ended());
}

// Two waiters for memory that one model holds: a batch request that has waited past `aging` competes as
// interactive and, being older, goes before a newer interactive one; without aging it goes after.
class AgingTest : public BrokerTest {
  public:
    void check(std::chrono::seconds aging, const std::string& expect_first) {
        add_model("holder", 6 * kGiB);
        add_model("batchy", 6 * kGiB, config::Priority::batch);
        add_model("inter", 6 * kGiB, config::Priority::interactive);
        start(fast(aging));
        auto h = acquire("holder");
        ASSERT_TRUE(settle(h));
        Lease held = h.get();
        auto batch = acquire("batchy");
        run_for(1300ms);  // past an aging of 1 s
        auto inter = acquire("inter");
        run_for(50ms);
        held.release();
        auto& first = expect_first == "batchy" ? batch : inter;
        ASSERT_TRUE(settle(first));
        Lease got = first.get();
        EXPECT_TRUE(got.valid());
        // The other one is still waiting: the device holds one model at a time.
        auto& second = expect_first == "batchy" ? inter : batch;
        run_for(100ms);
        EXPECT_NE(second.wait_for(0s), std::future_status::ready) << expect_first << " was not first";
        // (What happens after is admission's business: a batch request never evicts an interactive model
        // unless it has aged.)
    }
};

TEST_F(AgingTest, ABatchRequestThatWaitedPastAgingGoesBeforeANewerInteractiveOne) {
    check(1s, "batchy");
}

TEST_F(AgingTest, WithoutAgingInteractiveGoesFirst) {
    check(3600s, "inter");
}

TEST_F(BrokerTest, AnExclusiveModelWaitsUntilNoOtherRequestRunsOnItsDeviceAndThenHoldsIt) {
    add_model("shared", 3 * kGiB);
    add_model("solo", 3 * kGiB, config::Priority::interactive, /*exclusive=*/true);
    start(fast());
    auto s = acquire("shared");
    ASSERT_TRUE(settle(s));
    Lease shared = s.get();
    auto x = acquire("solo");
    run_for(150ms);
    EXPECT_NE(x.wait_for(0s), std::future_status::ready) << "a request of another model runs on the device";
    shared.release();
    ASSERT_TRUE(settle(x));
    Lease solo = x.get();
    // While the exclusive model runs a request, the other model's requests wait.
    auto s2 = acquire("shared");
    run_for(150ms);
    EXPECT_NE(s2.wait_for(0s), std::future_status::ready) << "the exclusive model holds the device";
    solo.release();
    ASSERT_TRUE(settle(s2));
    EXPECT_TRUE(s2.get().valid());
    EXPECT_EQ(fake->runs.size(), 2u);  // both stay loaded: the lock is about requests, not memory
}

TEST_F(BrokerTest, ACrashedEngineRestartsAfterTheBackoffAndRepeatedCrashesQuarantine) {
    add_model("a", 4 * kGiB);
    cfg.restart.max_crashes = 2;
    cfg.restart.backoff_initial = 1s;
    cfg.restart.quarantine = 600s;
    start(fast());
    auto first = acquire("a");
    ASSERT_TRUE(settle(first));
    first.get().release();
    run_for(20ms);
    fake->of("a")[0]->crash();
    const auto t0 = clock.now();
    auto again = acquire("a");
    ASSERT_TRUE(settle(again));
    EXPECT_GE(clock.now() - t0, 900ms) << "restarted before the backoff";
    again.get().release();
    ASSERT_EQ(fake->of("a").size(), 2u);
    run_for(20ms);
    fake->of("a")[1]->crash();  // the second failure within the window
    auto refused = acquire("a");
    ASSERT_TRUE(settle(refused));
    const auto e = error_of(refused);
    ASSERT_TRUE(e);
    EXPECT_EQ(e->kind(), ErrorKind::quarantined);
    EXPECT_EQ(e->details()["last_exit"]["signal"], 11);
    ASSERT_TRUE(e->retry_after_s());
    EXPECT_GT(*e->retry_after_s(), 500);
    EXPECT_EQ(fake->of("a").size(), 2u);
}

// The request waiting when the crash that quarantines happens gets the same answer as those after it: when
// to come back (Retry-After) and the exit (issue 51: it had neither).
TEST_F(BrokerTest, TheRequestThatTipsIntoQuarantineSaysWhenToComeBack) {
    add_model("a", 4 * kGiB);
    cfg.restart.max_crashes = 1;
    cfg.restart.quarantine = 600s;
    start(fast());
    auto running = acquire("a");
    ASSERT_TRUE(settle(running));
    auto waiting = acquire("a");  // its one slot is busy: it waits
    run_for(20ms);
    fake->of("a")[0]->crash();
    ASSERT_TRUE(settle(waiting));
    const auto e = error_of(waiting);
    ASSERT_TRUE(e);
    EXPECT_EQ(e->kind(), ErrorKind::quarantined);
    ASSERT_TRUE(e->retry_after_s());
    EXPECT_GT(*e->retry_after_s(), 500);
    EXPECT_EQ(e->details()["last_exit"]["signal"], 11);
    running.get().release();
}

TEST_F(BrokerTest, AFailedStartFailsItsWaitersWithTheExitReport) {
    add_model("a", 4 * kGiB);
    fake->configure = [](test::FakeRun& r) {
        engines::ExitReport x;
        x.kind = engines::ExitKind::exit_code;
        x.exit_code = 1;
        x.summary = "exit 1: cannot load model";
        r.fail_start = x;
    };
    start(fast());
    auto a = acquire("a");
    auto b = acquire("a");
    ASSERT_TRUE(settle(a));
    ASSERT_TRUE(settle(b));
    for (auto* f : {&a, &b}) {
        const auto e = error_of(*f);
        ASSERT_TRUE(e);
        EXPECT_EQ(e->kind(), ErrorKind::engine_failed);
        EXPECT_EQ(e->details()["exit"]["exit_code"], 1);
    }
    EXPECT_EQ(fake->runs.size(), 1u);  // both waited on the same start
}

TEST_F(BrokerTest, ShutdownFailsEveryWaiterAndStopsEveryEngine) {
    add_model("slow", 4 * kGiB);
    add_model("up", 4 * kGiB);
    fake->configure = [](test::FakeRun& r) {
        if (r.spec().model_name == "slow") r.ready_after = 60s;
    };
    start(fast());
    auto up = acquire("up");
    ASSERT_TRUE(settle(up));
    Lease held = up.get();
    auto waiting = acquire("slow");
    run_for(100ms);
    ASSERT_NE(waiting.wait_for(0s), std::future_status::ready);
    auto done = asio::co_spawn(ioc, broker->shutdown(), asio::use_future);
    ASSERT_TRUE(settle(waiting, 5s)) << "a waiter was left hanging by shutdown";
    EXPECT_EQ(error_kind(waiting), ErrorKind::shutting_down);
    held.release();
    ASSERT_TRUE(settle(done, 5s));
    for (const auto& r : fake->runs) EXPECT_TRUE(r->ended()) << r->spec().model_name;
    auto late = acquire("up");
    ASSERT_TRUE(settle(late, 2s));
    EXPECT_EQ(error_kind(late), ErrorKind::shutting_down);
}

TEST_F(BrokerTest, TheMeasuredUseOfTheWholeProcessGroupRaisesTheReservation) {
    // A server whose worker process (4243) holds most of the GPU memory, as vLLM's engine core does.
    add_model("a", 2 * kGiB);
    fake->configure = [](test::FakeRun& r) { r.fake_pid = 4242; };
    start(fast(), {{4242, 1 * kGiB}, {4243, 3 * kGiB}}, {{4242, {4242, 4243}}});
    auto a = acquire("a");
    ASSERT_TRUE(settle(a));
    Lease held = a.get();
    run_for(100ms);  // a few ticks
    const auto e = engine_status("a");
    EXPECT_EQ(e["reservation"]["bytes"], 4 * kGiB) << e.dump(2);
    EXPECT_EQ(e["reservation"]["source"], "measured") << e.dump(2);
}

// The runtime guard: an engine measured above its reservation is booked at its measured use at once, an event
// says so with both numbers, and the device, now over its capacity, evicts its idle holder (never the one
// with a running request) and admits a newcomer only into what is really free.
TEST_F(BrokerTest, AnEngineThatGrowsPastItsReservationIsBookedAsMeasuredAndIdleHoldersMakeRoom) {
    add_model("grower", 4 * kGiB);
    add_model("idle", 4 * kGiB);
    add_model("late", 2 * kGiB);
    fake->configure = [](test::FakeRun& r) {
        r.fake_pid = r.spec().model_name == "grower" ? 4242 : r.spec().model_name == "idle" ? 4343 : 4444;
    };
    // What the probe sees per process: the grower uses 7 GiB though it reserved 4.
    start(fast(), {{4242, 7 * kGiB}, {4343, 1 * kGiB}, {4444, 1 * kGiB}});
    {
        auto i = acquire("idle");
        ASSERT_TRUE(settle(i));
        i.get().release();
    }
    auto g = acquire("grower");
    ASSERT_TRUE(settle(g));
    Lease running = g.get();
    run_for(150ms);  // a few ticks of the probe
    EXPECT_TRUE(fake->of("idle")[0]->ended()) << "the idle holder makes room on the overcommitted device";
    EXPECT_FALSE(fake->of("grower")[0]->ended()) << "the engine that grew keeps its running request";
    auto st = asio::co_spawn(ioc, broker->view().status(), asio::use_future);
    ASSERT_TRUE(settle(st));
    const auto status = st.get();
    bool grew = false, over = false;
    for (const auto& e : status["events"]) {
        if (e["kind"] == "grew" && e["model"] == "grower") {
            grew = true;
            EXPECT_EQ(e["reserved_bytes"], 4 * kGiB) << e.dump();
            EXPECT_EQ(e["measured_bytes"], 7 * kGiB) << e.dump();
            EXPECT_EQ(e["over_by_bytes"], 3 * kGiB) << e.dump();
        }
        if (e["kind"] == "overcommitted") {
            over = true;
            EXPECT_EQ(e["over_by_bytes"], 1 * kGiB) << e.dump();
        }
    }
    EXPECT_TRUE(grew) << status["events"].dump(2);
    EXPECT_TRUE(over) << status["events"].dump(2);
    for (const auto& e : status["engines"])
        if (e["name"] == "grower") EXPECT_EQ(e["reservation"]["bytes"], 7 * kGiB) << e.dump(2);
    // 10 GiB - 7 booked as measured = 3 free: the 2 GiB model fits beside it, the idle one's place is gone.
    auto l = acquire("late");
    ASSERT_TRUE(settle(l));
    EXPECT_TRUE(l.get().valid());
    auto back = acquire("idle");
    run_for(150ms);
    EXPECT_NE(back.wait_for(0s), std::future_status::ready) << "4 GiB do not fit into the 1 GiB left";
    running.release();
    ASSERT_TRUE(settle(back));
}

// Issue 26: what an engine keeps after a request (ggml-cuda's pool, at the largest request so far: sd-server
// held up to ~900 MiB more than its reservation while idle) stays booked as the engine's once the request
// ends; a smaller request adds nothing, a larger one adds the difference.
TEST_F(BrokerTest, WhatAnEngineKeepsAfterARequestStaysBookedAtTheLargestSoFar) {
    add_model("img", 4 * kGiB);
    start(fast());
    const auto reservation = [&] {
        auto st = asio::co_spawn(ioc, broker->view().status(), asio::use_future);
        EXPECT_TRUE(settle(st));
        const auto status =
            st.get();  // (not st.get()["engines"] in the loop head: the temporary would dangle)
        for (const auto& e : status["engines"])
            if (e["name"] == "img") return e["reservation"]["bytes"].get<std::uint64_t>();
        return std::uint64_t{0};
    };
    const auto request = [&](std::uint64_t bytes, std::uint64_t kept) {
        RequestNeeds n;
        n.transient = engines::RequestCost{bytes, kept, "compute", nlohmann::json::object(), nullptr};
        auto f = asio::co_spawn(ioc, broker->acquire("img", n), asio::use_future);
        ASSERT_TRUE(settle(f));
        f.get().release();
        run_for(20ms);
    };
    request(2 * kGiB, 512 * kMiB);
    EXPECT_EQ(reservation(), 4 * kGiB + 512 * kMiB);
    request(1 * kGiB, 256 * kMiB);  // smaller: the pool is already larger
    EXPECT_EQ(reservation(), 4 * kGiB + 512 * kMiB);
    request(3 * kGiB, 1 * kGiB);
    EXPECT_EQ(reservation(), 5 * kGiB);
}

TEST_F(BrokerTest, AnUnknownModelOrARouteItsKindDoesNotServeIsRefusedBeforeAnythingStarts) {
    add_model("a", 4 * kGiB);
    start(fast());
    auto unknown = acquire("nope");
    ASSERT_TRUE(settle(unknown, 2s));
    EXPECT_EQ(error_kind(unknown), ErrorKind::model_not_found);
    RequestNeeds needs;
    needs.route = "/v1/images/generations";
    auto wrong = asio::co_spawn(ioc, broker->acquire("a", needs), asio::use_future);
    ASSERT_TRUE(settle(wrong, 2s));
    EXPECT_EQ(error_kind(wrong), ErrorKind::invalid_request);
    EXPECT_TRUE(fake->runs.empty());
}

}  // namespace
}  // namespace loch::broker

namespace loch::broker {
namespace {

// A reload (SIGHUP) adds and removes models and restarts a changed one only after its running request.
TEST_F(BrokerTest, AReloadAddsRemovesAndRestartsAChangedModelOnceItsRequestEnds) {
    add_model("a", 2 * kGiB);
    add_model("gone", 1 * kGiB);
    start(fast());
    auto first = acquire("a");
    ASSERT_TRUE(settle(first));
    Lease held = first.get();

    config::Config next = cfg;
    next.models.erase(next.models.begin() + 1);  // "gone"
    auto changed = std::make_shared<engines::CommandSettings>();
    changed->argv = {"/bin/true", "--new"};
    changed->health_path = "";
    next.models[0].settings = changed;  // a new launch for "a"
    config::ModelConfig added = next.models[0];
    added.name = "b";
    next.models.push_back(added);
    auto reloaded = asio::co_spawn(ioc, broker->reload(next), asio::use_future);
    ASSERT_TRUE(settle(reloaded));
    const auto r = reloaded.get();
    EXPECT_EQ(r["added"], nlohmann::json::array({"b"})) << r;
    EXPECT_EQ(r["removed"], nlohmann::json::array({"gone"})) << r;
    EXPECT_EQ(r["restarting"], nlohmann::json::array({"a"})) << r;

    // The running request is not cut: "a" keeps its engine until the lease ends.
    run_for(100ms);
    ASSERT_EQ(fake->of("a").size(), 1u);
    EXPECT_EQ(fake->of("a")[0]->stop_calls, 0);
    held.release();
    run_for(200ms);
    EXPECT_GE(fake->of("a")[0]->stop_calls, 1);

    // The next request for "a" starts the new launch; "gone" is unknown; "b" is served.
    auto again = acquire("a");
    ASSERT_TRUE(settle(again));
    EXPECT_TRUE(again.get().valid());
    ASSERT_EQ(fake->of("a").size(), 2u);
    EXPECT_EQ(fake->of("a")[1]->spec().argv.back(), "--new");
    auto removed = acquire("gone");
    ASSERT_TRUE(settle(removed));
    EXPECT_EQ(error_kind(removed), ErrorKind::model_not_found);
    auto b = acquire("b");
    ASSERT_TRUE(settle(b));
    EXPECT_TRUE(b.get().valid());
}

// A footprint source that takes a while (as a dry run does): the command kind's estimate after 150 ms.
class SlowFootprint : public KindFootprint {
  public:
    SlowFootprint(asio::any_io_executor ex, core::Clock& clock)
        : KindFootprint({}, ex), ex_(std::move(ex)), clock_(clock) {}
    asio::awaitable<Footprint> estimate(const config::Config& cfg, const config::ModelConfig& model,
                                        const std::vector<engines::Placement>& devices) override {
        co_await core::sleep_for(ex_, clock_, 150ms);
        co_return co_await KindFootprint::estimate(cfg, model, devices);
    }

  private:
    asio::any_io_executor ex_;
    core::Clock& clock_;
};

// The same for a model that never ran, whose plan is not ready when the request arrives: acquire waits for
// the plan, then refuses, before admission starts it.
TEST_F(BrokerTest, ANeverFittingRequestForAModelThatNeverRanIsRefusedBeforeItLoads) {
    add_model("img", 6 * kGiB);
    add_model("chat", 3 * kGiB);
    footprints = std::make_unique<SlowFootprint>(ioc.get_executor(), clock);
    start(fast());
    auto chat = acquire("chat");
    ASSERT_TRUE(settle(chat));
    chat.get().release();
    auto big = acquire_with_compute("img", 5 * kGiB, "compute at 2048x2048");
    ASSERT_TRUE(settle(big, 2s));
    const auto e = error_of(big);
    ASSERT_TRUE(e);
    EXPECT_NE(std::string(e->what()).find("can ever give"), std::string::npos) << e->what();
    EXPECT_TRUE(fake->of("img").empty()) << "img loaded for a request that can never run";
    EXPECT_EQ(engine_status("chat")["state"], "ready");
}

// A reload while a model's memory is being planned: the plan of the old entry is dropped and the new entry
// is planned (its reservation is the new figure); requests that waited on the planning join one start.
TEST_F(BrokerTest, AReloadDuringPlanningPlansTheNewEntryAndTheWaitersShareOneStart) {
    add_model("a", 2 * kGiB);
    footprints = std::make_unique<SlowFootprint>(ioc.get_executor(), clock);
    start(fast());
    auto first = acquire("a");
    auto second = acquire("a");
    run_for(50ms);  // planning the 2 GiB entry
    config::Config next = cfg;
    next.models[0].memory["*"] = 3 * kGiB;
    auto reloaded = asio::co_spawn(ioc, broker->reload(next), asio::use_future);
    ASSERT_TRUE(settle(reloaded));
    ASSERT_TRUE(settle(first));
    first.get().release();  // one slot: the second request is served after the first
    ASSERT_TRUE(settle(second));
    Lease held = second.get();
    EXPECT_EQ(fake->of("a").size(), 1u);
    EXPECT_EQ(engine_status("a")["reservation"]["bytes"], 3 * kGiB);
}

// The Vulkan trap on an APU (the Strix Halo fixture tree through the device model): a Vulkan engine
// allocates from the DEVICE_LOCAL heap (~4 GiB on RADV), not from the GTT pool the ROCm build uses. With
// `devices.<id>.backend: vulkan` the heap bounds the device, and a request or model above it is refused at
// once with the heap, the GTT figure and the fix.
// The held-out sequence of issue 51: a model runs, is evicted, then a request arrives whose compute beside
// the weights can never fit the device. It is refused on arrival, with the figures: nothing is evicted for
// it, nothing loads (it was evicted, then reloaded for 10 s, then refused).
TEST_F(BrokerTest, ANeverFittingRequestForAnEvictedModelIsRefusedBeforeAnythingIsEvictedOrLoaded) {
    add_model("img", 6 * kGiB);
    add_model("chat", 3 * kGiB);
    start(fast());  // a 10 GiB device
    auto first = acquire("img");
    ASSERT_TRUE(settle(first));
    first.get().release();
    run_for(20ms);
    auto chat = acquire("chat");  // 6 + 3 GiB: both resident
    ASSERT_TRUE(settle(chat));
    chat.get().release();
    // img goes (as an eviction stops it): stopped, its footprint known, its last device remembered.
    auto unload = asio::co_spawn(ioc, broker->control().unload("img"), asio::use_future);
    ASSERT_TRUE(settle(unload, 2s));
    run_for(50ms);
    ASSERT_EQ(engine_status("img")["state"], "stopped");
    const auto runs_before = fake->runs.size();
    // 6 GiB of weights + 5 GiB > the 10 GiB device
    auto big = acquire_with_compute("img", 5 * kGiB, "compute at 2048x2048");
    ASSERT_TRUE(settle(big, 2s));
    const auto e = error_of(big);
    ASSERT_TRUE(e);
    EXPECT_EQ(e->kind(), ErrorKind::insufficient_memory);
    EXPECT_NE(std::string(e->what()).find("can ever give"), std::string::npos) << e->what();
    EXPECT_EQ(fake->runs.size(), runs_before) << "something started for a request that can never run";
    EXPECT_EQ(engine_status("chat")["state"], "ready") << "the chat model was evicted for it";
}

TEST_F(BrokerTest, OnAVulkanApuTheHeapBoundsRequestsAndTheRefusalNamesTheRocmBuild) {
    auto report = devices::probe([] {
        devices::ProbeOptions o;
        o.sysroot = loch::testing::sysroot_fixture("strix-halo-tuned");
        return o;
    }());
    std::vector<DeviceSnapshot> snap;
    std::string apu;
    for (auto& d : report.devices) {
        if (d.kind == devices::DeviceKind::integrated) {
            d.vulkan_device_local_heap =
                devices::ProbedFigure::known({4 * kGiB, Source::measured, "fixture heap"}, "fixture heap");
            apu = d.id;
        }
        if (auto s = snapshot_of(d)) snap.push_back(*s);
    }
    ASSERT_FALSE(apu.empty());
    config::DeviceConfig dc;
    dc.id = apu;
    dc.backend = "vulkan";
    cfg.devices[apu] = dc;
    add_model("images", 3 * kGiB);
    add_model("big", 6 * kGiB);
    for (auto& m : cfg.models) m.devices = {apu};
    start_on(snap, fast());
    auto lease = acquire("images");
    ASSERT_TRUE(settle(lease));
    lease.get();  // 3 GiB of weights fit the heap
    auto image = acquire_with_compute("images", 2 * kGiB, "compute at 1024x1024: 2.00 GiB (decoder)");
    ASSERT_TRUE(settle(image, 2s));
    const auto e = error_of(image);
    ASSERT_TRUE(e);
    EXPECT_EQ(e->kind(), ErrorKind::insufficient_memory);
    EXPECT_NE(std::string(e->what()).find("devices." + apu + ".backend: rocm"), std::string::npos)
        << e->what();
    EXPECT_NE(std::string(e->what()).find("Vulkan heap"), std::string::npos) << e->what();
    EXPECT_LE(e->details()["capacity_bytes"].get<std::uint64_t>(), 4 * kGiB);
    // A model larger than the heap (but far below the 100+ GiB GTT pool) is refused the same way.
    auto big = acquire("big");
    ASSERT_TRUE(settle(big, 2s));
    const auto eb = error_of(big);
    ASSERT_TRUE(eb);
    EXPECT_NE(std::string(eb->what()).find("ROCm build"), std::string::npos) << eb->what();
}

}  // namespace
}  // namespace loch::broker

namespace loch::broker {
namespace {

// Several GPUs (issue 14) through the probe's test double: two fake-sized cards. The command kind does not
// split a model, so this test double of the footprint source does: each device its share of the model's
// configured memory plus 512 MiB of runtime overhead.
class SplitByShares : public KindFootprint {
  public:
    using KindFootprint::KindFootprint;
    std::vector<Need> split(const config::Config&, const config::ModelConfig& model,
                            const engines::Placement& where) override {
        const auto all = where.all();
        float sum = 0;
        for (float f : where.shares) sum += f;
        std::vector<Need> out;
        for (std::size_t i = 0; i < all.size(); ++i) {
            Need n;
            n.device = all[i].device;
            n.bytes = static_cast<std::uint64_t>(double(model.memory.at("*")) * where.shares.at(i) / sum) +
                      512 * kMiB;
            n.why = "test double: share of the configured memory + 512 MiB";
            out.push_back(n);
        }
        return out;
    }
};

class BrokerSplitTest : public BrokerTest {
  protected:
    void start_two_cards() {
        const std::vector<DeviceSnapshot> snap = {test_fixture::fake_gpu(10 * kGiB, 0),
                                                  test_fixture::fake_gpu(10 * kGiB, 1)};
        for (auto& m : cfg.models)
            if (!m.pinned && m.devices == std::vector<std::string>{kGpu})
                m.devices.clear();  // add_model's default: every GPU
        footprints = std::make_unique<SplitByShares>(std::filesystem::path{}, ioc.get_executor());
        start_on(snap, fast());
    }
    nlohmann::json status() {
        auto st = asio::co_spawn(ioc, broker->view().status(), asio::use_future);
        EXPECT_TRUE(settle(st));
        return st.get();
    }
    // The engine's reservation on each device, from the ledger.
    std::map<std::string, std::uint64_t> reserved(const std::string& engine) {
        std::map<std::string, std::uint64_t> out;
        const auto st = status();  // (not status()["devices"] in the range: the temporary would be gone)
        for (const auto& d : st["devices"])
            for (const auto& r : d["reservations"])
                if (r["engine"] == engine) out[d["device"]] = r["figure"]["bytes"].get<std::uint64_t>();
        return out;
    }
};

TEST_F(BrokerSplitTest, TwoModelsOnTwoCardsThenOneTooLargeForEitherIsSplitOverBothAfterEvictingThem) {
    add_model("a", 6 * kGiB);
    add_model("b", 6 * kGiB);
    add_model("big", 14 * kGiB);  // never fits one 10 GiB card
    start_two_cards();
    for (const char* name : {"a", "b"}) {
        auto l = acquire(name);
        ASSERT_TRUE(settle(l));
        l.get().release();
    }
    // One model per card, each engine seeing only its own card.
    ASSERT_EQ(fake->of("a").size(), 1u);
    ASSERT_EQ(fake->of("b").size(), 1u);
    EXPECT_EQ(fake->of("a")[0]->spec().env.at("CUDA_VISIBLE_DEVICES"), "0");
    EXPECT_EQ(fake->of("b")[0]->spec().env.at("CUDA_VISIBLE_DEVICES"), "1");
    EXPECT_EQ(reserved("a"), (std::map<std::string, std::uint64_t>{{"nvidia:0", 6 * kGiB}}));
    EXPECT_EQ(reserved("b"), (std::map<std::string, std::uint64_t>{{"nvidia:1", 6 * kGiB}}));

    run_for(50ms);
    auto big = acquire("big");
    ASSERT_TRUE(settle(big));
    EXPECT_TRUE(big.get().valid());
    EXPECT_TRUE(fake->of("a")[0]->ended()) << "evicted for the split";
    EXPECT_TRUE(fake->of("b")[0]->ended()) << "evicted for the split";
    ASSERT_EQ(fake->of("big").size(), 1u);
    const auto& env = fake->of("big")[0]->spec().env;
    EXPECT_TRUE(env.at("CUDA_VISIBLE_DEVICES") == "0,1" || env.at("CUDA_VISIBLE_DEVICES") == "1,0")
        << env.at("CUDA_VISIBLE_DEVICES");
    // One engine, one reservation per device: 7 GiB + 512 MiB on each (even shares of two empty cards).
    const auto held = reserved("big");
    ASSERT_EQ(held.size(), 2u);
    for (const auto& [device, bytes] : held) EXPECT_EQ(bytes, 7 * kGiB + 512 * kMiB) << device;
    bool seen = false;
    const auto st = status();
    for (const auto& e : st["engines"])
        if (e["name"] == "big") {
            seen = true;
            ASSERT_TRUE(e.contains("devices")) << e.dump(2);
            EXPECT_EQ(e["devices"].size(), 2u);
        }
    EXPECT_TRUE(seen);
}

TEST_F(BrokerSplitTest, AModelThatMayGoAnywhereLeavesThePinnedModelsCardAlone) {
    add_model("pinned", 8 * kGiB);
    cfg.models.back().pinned = true;
    cfg.models.back().devices = {"nvidia:0"};
    add_model("x", 4 * kGiB);
    start_two_cards();
    // `pinned` is not running yet and may only use nvidia:0: x, which may use either card, takes nvidia:1
    // (first in order would have been nvidia:0, and x would have been evicted for `pinned` later).
    auto x = acquire("x");
    ASSERT_TRUE(settle(x));
    x.get().release();
    EXPECT_EQ(reserved("x"), (std::map<std::string, std::uint64_t>{{"nvidia:1", 4 * kGiB}}));
    auto p = acquire("pinned");
    ASSERT_TRUE(settle(p));
    EXPECT_TRUE(p.get().valid());
    ASSERT_EQ(fake->of("x").size(), 1u);
    EXPECT_FALSE(fake->of("x")[0]->ended()) << "the pinned model found its room without evicting x";
}

TEST_F(BrokerSplitTest, AnExclusiveSplitHoldsEveryCardItRunsOn) {
    add_model("big", 14 * kGiB, config::Priority::interactive, /*exclusive=*/true);
    add_model("small", 1 * kGiB);
    cfg.models.back().devices = {"nvidia:1"};  // the split's second card (nvidia:0, as free, is its main)
    start_two_cards();
    auto big = acquire("big");
    ASSERT_TRUE(settle(big));
    Lease held = big.get();
    ASSERT_EQ(reserved("big").size(), 2u);
    auto small = acquire("small");
    run_for(200ms);
    EXPECT_NE(small.wait_for(0s), std::future_status::ready) << "nvidia:1 is held by the exclusive split";
    held.release();
    ASSERT_TRUE(settle(small));
    EXPECT_TRUE(small.get().valid());
}

TEST_F(BrokerSplitTest, ASplitThatCanNeverFitIsRefusedWithEachDevicesNeedAndCapacity) {
    add_model("huge", 30 * kGiB);  // 15.5 GiB on each of two 10 GiB cards
    start_two_cards();
    auto huge = acquire("huge");
    ASSERT_TRUE(settle(huge, 2s));
    const auto e = error_of(huge);
    ASSERT_TRUE(e);
    EXPECT_EQ(e->kind(), ErrorKind::insufficient_memory);
    EXPECT_NE(std::string(e->what()).find("split over"), std::string::npos) << e->what();
    const auto& split = e->details()["split"];
    ASSERT_EQ(split.size(), 2u) << e->details().dump(2);
    for (const auto& p : split) {
        EXPECT_EQ(p["need_bytes"], 15 * kGiB + 512 * kMiB);
        EXPECT_EQ(p["capacity_bytes"], 10 * kGiB);
    }
    EXPECT_TRUE(fake->runs.empty()) << "nothing was started";
}

}  // namespace
}  // namespace loch::broker

namespace loch::broker::test_fixture {

// Before an engine is told to stop, the proxy is told (to close its idle keep-alive connections to it,
// which hold llama-server's exit by ~0.1 s): with that engine's address and secret, before its stop.
TEST_F(BrokerTest, TheProxyIsToldBeforeAnEngineIsStoppedWithItsAddress) {
    add_model("a", 6 * kGiB);
    add_model("b", 6 * kGiB);
    start(fast());
    std::vector<std::pair<std::uint16_t, int>> told;  // port, the engine's stop calls by then
    broker->listeners().engine_stopping = [&](const engines::EngineAddress& at) {
        const auto& a = fake->of("a");
        told.emplace_back(at.port, a.empty() ? -1 : a[0]->stop_calls);
        EXPECT_EQ(at.api_key, a.empty() ? "" : a[0]->spec().api_key);
    };
    running("a").release();
    running("b").release();  // evicts a
    ASSERT_EQ(fake->of("a").size(), 1u);
    ASSERT_EQ(told.size(), 1u);
    EXPECT_EQ(told[0].first, fake->of("a")[0]->port());
    EXPECT_EQ(told[0].second, 0) << "told before the stop";
    EXPECT_EQ(fake->of("a")[0]->stop_calls, 1);
    broker->listeners().engine_stopping = nullptr;  // `told` goes with this scope; the shutdown stops b
}

}  // namespace loch::broker::test_fixture
