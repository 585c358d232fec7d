// Holds and jobs (broker/holds.hpp) in the broker, through the fake launcher: a job evicts an idle engine, an
// engine waits for a job and names it, a job that can never fit is refused at once, heartbeats, a job's
// process group measured (a real `sleep` process), re-registration of a running job, and bad input.
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>

#include "broker_fixture.hpp"

namespace loch::broker {
namespace {

namespace asio = boost::asio;
using namespace std::chrono_literals;
using test_fixture::BrokerTest;
using test_fixture::fast;
using test_fixture::kGpu;

class HoldsTest : public BrokerTest {
  protected:
    nlohmann::json create(nlohmann::json body) {
        auto f = asio::co_spawn(ioc, broker->holds().create(hold_spec_from_json(body)), asio::use_future);
        EXPECT_TRUE(settle(f));
        return f.get();
    }
    std::future<nlohmann::json> create_async(nlohmann::json body) {
        return asio::co_spawn(ioc, broker->holds().create(hold_spec_from_json(body)), asio::use_future);
    }
    nlohmann::json status() {
        auto st = asio::co_spawn(ioc, broker->view().status(), asio::use_future);
        EXPECT_TRUE(settle(st));
        return st.get();
    }
    // Runs the broker until the hold is in `state` (or 5 s passed).
    nlohmann::json until_state(const std::string& id, const std::string& state) {
        nlohmann::json h;
        run_until(
            [&] {
                h = broker->holds().get(id).value_or(nlohmann::json());
                return h.value("state", "") == state;
            },
            5s);
        return h;
    }
    // One request served and ended: the model is loaded and idle.
    bool served_once(const std::string& model) {
        auto l = acquire(model);
        if (!settle(l)) return false;
        l.get().release();
        return true;
    }
    std::string state_of(const std::string& model) {
        const auto st = status();  // (a member of a temporary would dangle in the loop)
        for (const auto& e : st["engines"])
            if (e["name"] == model) return e["state"];
        return "?";
    }
};

// The fake 10 GiB GPU with `used` bytes in use and the processes it reports (pid → bytes).
DeviceSnapshot busy_gpu(std::uint64_t used, std::map<int, std::uint64_t> processes) {
    DeviceSnapshot gpu;
    gpu.id = kGpu;
    gpu.total = {10 * kGiB, Source::measured, "fake"};
    gpu.used = MemoryFigure{used, Source::measured, "fake"};
    gpu.backend = "cuda";
    gpu.ordinal = 0;
    gpu.process_bytes = std::move(processes);
    return gpu;
}

// A real process group for the measuring tests: `sleep 30` as the leader of its own group.
struct SleepingGroup {
    SleepingGroup() {
        posix_spawnattr_t a;
        posix_spawnattr_init(&a);
        posix_spawnattr_setflags(&a, POSIX_SPAWN_SETPGROUP);
        posix_spawnattr_setpgroup(&a, 0);
        char* argv[] = {const_cast<char*>("sleep"), const_cast<char*>("30"), nullptr};
        posix_spawnp(&pid, "sleep", nullptr, &a, argv, nullptr);
        posix_spawnattr_destroy(&a);
    }
    ~SleepingGroup() { stop(); }
    void stop() {
        if (pid <= 0) return;
        ::kill(pid, SIGKILL);
        ::waitpid(pid, nullptr, 0);
        pid = 0;
    }
    pid_t pid = 0;
};

TEST_F(HoldsTest, AJobEvictsAnIdleEngineAndIsGrantedItsDevice) {
    add_model("chat", 6 * kGiB);
    start(fast());
    ASSERT_TRUE(served_once("chat"));
    run_for(50ms);
    ASSERT_EQ(state_of("chat"), "ready");
    const auto h = create({{"name", "train"}, {"memory", "8GiB"}});
    EXPECT_EQ(h["state"], "waiting") << h.dump(2);
    EXPECT_NE(h["reason"].get<std::string>().find("evicting chat"), std::string::npos) << h.dump(2);
    const auto granted = until_state(h["id"], "granted");
    ASSERT_EQ(granted["state"], "granted") << granted.dump(2);
    EXPECT_EQ(granted["device"], kGpu);
    EXPECT_EQ(granted["env"]["CUDA_VISIBLE_DEVICES"], "0") << "the job sees only its device, as engines do";
    EXPECT_EQ(state_of("chat"), "stopped");
}

TEST_F(HoldsTest, AnEngineWaitsForAJobNamedInItsReasonAndStartsWhenTheJobEnds) {
    add_model("chat", 4 * kGiB);
    start(fast());
    const auto h = create({{"name", "train"}, {"memory", "8GiB"}, {"command", "python train.py"}});
    ASSERT_EQ(h["state"], "granted") << h.dump(2);
    auto l = acquire("chat");
    run_for(200ms);
    ASSERT_NE(l.wait_for(0s), std::future_status::ready) << "the job holds the memory: the request waits";
    const auto st = status();
    ASSERT_EQ(st["queue"]["waiting"].size(), 1u) << st.dump(2);
    const std::string reason = st["queue"]["waiting"][0]["reason"];
    EXPECT_NE(reason.find("job:train"), std::string::npos) << reason;
    EXPECT_NE(reason.find("python train.py"), std::string::npos) << reason;
    ASSERT_TRUE(broker->holds().release(h["id"], "test"));
    ASSERT_TRUE(settle(l));
    EXPECT_TRUE(l.get().valid());
}

TEST_F(HoldsTest, AJobThatCanNeverFitIsRefusedAtOnceWithTheNumbersAndWhoHoldsTheDevice) {
    start(fast());
    const auto first = create({{"name", "train"}, {"memory", "6GiB"}});
    ASSERT_EQ(first["state"], "granted");
    auto f = create_async({{"name", "huge"}, {"memory", "12GiB"}});
    ASSERT_TRUE(settle(f));
    const auto e = error_of(f);
    ASSERT_TRUE(e);
    EXPECT_EQ(e->kind(), ErrorKind::insufficient_memory);
    EXPECT_EQ(e->details()["need_bytes"], 12 * kGiB);
    EXPECT_EQ(e->details()["capacity_bytes"], 10 * kGiB);
    EXPECT_NE(std::string(e->what()).find("job:train"), std::string::npos) << e->what();
    EXPECT_TRUE(broker->holds().list().size() == 1) << "the refused one is not kept as a holder";
}

TEST_F(HoldsTest, ASecondJobWaitsInTheQueueWithItsPositionAndIsGrantedWhenTheFirstIsReleased) {
    start(fast());
    const auto first = create({{"name", "a"}, {"memory", "6GiB"}});
    const auto second = create({{"name", "b"}, {"memory", "6GiB"}});
    ASSERT_EQ(second["state"], "waiting") << second.dump(2);
    EXPECT_EQ(second["position"], 1);
    EXPECT_TRUE(second["eta_s"].is_null()) << "no measured durations: the ETA is said to be unknown";
    broker->holds().release(first["id"], "done");
    EXPECT_EQ(until_state(second["id"], "granted")["state"], "granted");
}

TEST_F(HoldsTest, ACancelledHoldIsReleasedMarkedCancelledAndItsMemoryGoesToTheNextWaiter) {
    start(fast());
    const auto first = create({{"name", "a"}, {"memory", "6GiB"}});
    const auto second = create({{"name", "b"}, {"memory", "6GiB"}});
    const auto third = create({{"name", "c"}, {"memory", "6GiB"}});
    ASSERT_EQ(third["state"], "waiting");
    const auto waiting = broker->holds().cancel(second["id"]);  // a waiting job
    ASSERT_TRUE(waiting);
    EXPECT_EQ((*waiting)["state"], "released");
    EXPECT_EQ((*waiting)["cancelled"], true);
    EXPECT_EQ(broker->holds().get(third["id"])->at("position"), 1);
    const auto running = broker->holds().cancel(first["id"]);  // a granted one
    ASSERT_TRUE(running);
    EXPECT_EQ((*running)["cancelled"], true);
    EXPECT_NE((*running)["reason"].get<std::string>().find("cancel"), std::string::npos) << running->dump();
    EXPECT_EQ(until_state(third["id"], "granted")["state"], "granted");
    EXPECT_FALSE(broker->holds().cancel("hold-999"));
    EXPECT_FALSE(broker->holds().get(third["id"])->contains("cancelled"));
}

TEST_F(HoldsTest, AHoldWithoutHeartbeatIsReleasedAndOneWithHeartbeatsStays) {
    start(fast());
    const auto kept = create({{"name", "kept"}, {"memory", "2GiB"}, {"ttl_s", 1}});
    const auto lost = create({{"name", "lost"}, {"memory", "2GiB"}, {"ttl_s", 1}});
    for (int i = 0; i < 8; ++i) {
        broker->holds().update(kept["id"], std::nullopt);
        run_for(200ms);
    }
    EXPECT_EQ(broker->holds().get(kept["id"])->at("state"), "granted");
    const auto gone = broker->holds().get(lost["id"], false);
    ASSERT_TRUE(gone);
    EXPECT_EQ((*gone)["state"], "released");
    EXPECT_NE((*gone)["reason"].get<std::string>().find("no heartbeat"), std::string::npos) << gone->dump();
}

TEST_F(HoldsTest, AJobsProcessGroupIsMeasuredItsGrowthReportedAndItsPeakSizesTheNextRun) {
    SleepingGroup job;
    ASSERT_GT(job.pid, 0);
    start(fast(), {{job.pid, 7 * kGiB}});
    const auto h = create({{"name", "grower"}, {"memory", "4GiB"}, {"pgid", job.pid}});
    ASSERT_EQ(h["state"], "granted");
    run_for(150ms);
    const auto now = broker->holds().get(h["id"]).value();
    EXPECT_EQ(now["bytes"], 7 * kGiB) << now.dump(2);
    bool grew = false;
    const auto st = status();
    for (const auto& e : st["events"])
        if (e["kind"] == "grew" && e.value("job", "") == "grower") {
            grew = true;
            EXPECT_EQ(e["over_by_bytes"], 3 * kGiB) << e.dump();
        }
    EXPECT_TRUE(grew);
    // The group ends: the hold goes with it, and the next run of that name needs no size.
    job.stop();
    run_for(150ms);
    EXPECT_EQ(broker->holds().get(h["id"], false)->at("state"), "released");
    const auto next = create({{"name", "grower"}});
    EXPECT_EQ(next["bytes"], 7 * kGiB) << next.dump(2);
    EXPECT_EQ(next["source"], "measured-earlier");
}

TEST_F(HoldsTest, AHoldWithLostHeartbeatStaysWhileItsProcessGroupRuns) {
    SleepingGroup job;
    start(fast());
    const auto h = create({{"name", "j"}, {"memory", "1GiB"}, {"ttl_s", 1}, {"pgid", job.pid}});
    run_for(1500ms);
    EXPECT_EQ(broker->holds().get(h["id"], false)->at("state"), "granted")
        << "its memory is in use: never dropped";
}

TEST_F(HoldsTest, ARunningJobReRegistersAtOnceEvenOverTheDevice) {
    add_model("chat", 6 * kGiB);
    start(fast());
    ASSERT_TRUE(served_once("chat"));
    const auto h = create({{"name", "j"}, {"memory", 6 * kGiB}, {"device", kGpu}, {"running", true}});
    EXPECT_EQ(h["state"], "granted") << "already running: booked whatever admission says";
    run_for(200ms);
    EXPECT_EQ(state_of("chat"), "stopped") << "the idle engine made room for the over-booked device";
}

TEST_F(HoldsTest, BadInputIsRefusedBeforeAnythingIsBooked) {
    start(fast());
    const auto invalid = [&](nlohmann::json body) {
        try {
            auto f = create_async(body);
            settle(f);
            f.get();
        } catch (const Error& e) {
            return e.kind() == ErrorKind::invalid_request;
        }
        return false;
    };
    EXPECT_TRUE(invalid({{"memory", -5}}));
    EXPECT_TRUE(invalid({{"memory", "lots"}}));
    EXPECT_TRUE(invalid({{"memory", "2PiB"}}));
    EXPECT_TRUE(invalid({{"memory", 0}}));
    EXPECT_TRUE(invalid({{"memory", "1GiB"}, {"device", "nvidia:7"}}));
    EXPECT_TRUE(invalid({{"memory", "1GiB"}, {"name", "../etc"}}));
    EXPECT_TRUE(invalid({{"memory", "1GiB"}, {"colour", "red"}}));
    EXPECT_TRUE(invalid({{"name", "never-ran"}})) << "no size and nothing remembered";
    EXPECT_TRUE(invalid({{"memory", "1GiB"}, {"like", "chat"}}));
    EXPECT_TRUE(invalid({{"like", "no-such-model"}}));
    EXPECT_TRUE(broker->holds().list().empty());
}

}  // namespace
}  // namespace loch::broker

namespace loch::broker {
namespace {

TEST_F(HoldsTest, ProgramsLochDidNotStartAreNamedInRefusalsReasonsAndStatus) {
    add_model("chat", 4 * kGiB);
    process_info[4123] = {4123, "alice", "python train.py"};
    start_on({busy_gpu(7 * kGiB, {{4123, 5 * kGiB}})}, fast());  // used: the program's 5 and the job's 2
    // 10 GiB − 5 used by the program − 2 by a job: the model (4) waits, the program named in its reason.
    ASSERT_EQ(create({{"name", "j"}, {"memory", "2GiB"}})["state"], "granted");
    auto l = acquire("chat");
    run_for(100ms);
    const auto st = status();
    ASSERT_EQ(st["queue"]["waiting"].size(), 1u) << st.dump(2);
    const std::string reason = st["queue"]["waiting"][0]["reason"];
    EXPECT_NE(reason.find("`python train.py` (pid 4123, alice) 5.00 GiB"), std::string::npos) << reason;
    const auto& others = st["devices"][0]["other_processes"];
    ASSERT_EQ(others.size(), 1u) << st["devices"].dump(2);
    EXPECT_EQ(others[0]["command"], "python train.py");
    EXPECT_EQ(others[0]["bytes"], 5 * kGiB);
    // A job that can never fit beside it: refused, the program named.
    auto f = create_async({{"name", "big"}, {"memory", "8GiB"}});
    ASSERT_TRUE(settle(f));
    const auto e = error_of(f);
    ASSERT_TRUE(e);
    EXPECT_NE(std::string(e->what()).find("python train.py"), std::string::npos) << e->what();
}

TEST_F(HoldsTest, AJobsOwnProcessesAreNotOtherPrograms) {
    SleepingGroup job;
    start_on({busy_gpu(3 * kGiB, {{job.pid, 3 * kGiB}})}, fast());
    create({{"name", "j"}, {"memory", "3GiB"}, {"pgid", job.pid}});
    run_for(100ms);
    const auto st = status();
    EXPECT_TRUE(st["devices"][0]["other_processes"].empty()) << st["devices"].dump(2);
    EXPECT_EQ(st["devices"][0]["outside_bytes"], 0) << "its use is the job's, booked in its hold";
}

}  // namespace
}  // namespace loch::broker

namespace loch::broker {
namespace {

TEST_F(HoldsTest, AWaitingJobsEtaComesFromTheHolderJobsEarlierRunAndIsUnknownWithoutOne) {
    start(fast());
    // A first run of "train", timed: about 0.3 s.
    const auto first = create({{"name", "train"}, {"memory", "6GiB"}});
    run_for(300ms);
    broker->holds().release(first["id"], "done");
    // Its second run holds the device; another job waits for it: ETA = what is left of the 0.3 s.
    const auto again = create({{"name", "train"}, {"memory", "6GiB"}});
    ASSERT_EQ(again["state"], "granted");
    const auto waiting = create({{"name", "scan"}, {"memory", "6GiB"}});
    ASSERT_EQ(waiting["state"], "waiting");
    ASSERT_TRUE(waiting["eta_s"].is_number()) << waiting.dump(2);
    EXPECT_LE(waiting["eta_s"].get<double>(), 0.5);
    EXPECT_NE(waiting["eta"].get<std::string>().find("last run"), std::string::npos) << waiting.dump(2);
    // A holder never timed: unknown, and it says why.
    const auto other = create({{"name", "other"}, {"memory", "3GiB"}});
    const auto blocked = create({{"name", "late"}, {"memory", "8GiB"}});
    broker->holds().release(again["id"], "done");
    run_for(100ms);
    const auto now = broker->holds().get(blocked["id"]).value();
    ASSERT_EQ(now["state"], "waiting") << now.dump(2);
    EXPECT_TRUE(now["eta_s"].is_null()) << now.dump(2);
    EXPECT_NE(now["eta"].get<std::string>().find("no earlier run"), std::string::npos) << now.dump(2);
    (void)other;
}

TEST_F(HoldsTest, ARequestWaitingForASlotHasAnEtaOnceARequestWasTimed) {
    add_model("chat", 2 * kGiB);
    start(fast());
    {
        auto first = acquire("chat");
        ASSERT_TRUE(settle(first));
        run_for(200ms);
        first.get().release();  // timed: ~0.2 s
    }
    auto held = acquire("chat");
    ASSERT_TRUE(settle(held));
    auto second = acquire("chat");
    run_for(50ms);
    const auto st = status();
    ASSERT_EQ(st["queue"]["waiting"].size(), 1u);
    const auto& w = st["queue"]["waiting"][0];
    ASSERT_TRUE(w["eta_s"].is_number()) << w.dump(2);
    EXPECT_NEAR(w["eta_s"].get<double>(), 0.2, 0.15) << w.dump(2);
    EXPECT_EQ(w["position"], 1);
    held.get().release();
    ASSERT_TRUE(settle(second));
}

}  // namespace
}  // namespace loch::broker

namespace loch::broker {
namespace {

TEST_F(HoldsTest, AReleasedJobStaysBookedWhileTheDeviceStillShowsItsProcess) {
    SleepingGroup job;
    // The device keeps listing the job's process: it has not given the memory back.
    start_on({busy_gpu(6 * kGiB, {{job.pid, 6 * kGiB}})}, fast());
    // (Booked as a running job: the fixed probe already shows its use.)
    const auto h =
        create({{"name", "j"}, {"memory", 6 * kGiB}, {"device", kGpu}, {"running", true}, {"pgid", job.pid}});
    ASSERT_EQ(h["state"], "granted");
    broker->holds().release(h["id"], "done");
    run_for(100ms);
    auto st = status();
    EXPECT_EQ(st["devices"][0]["own_bytes"], 6 * kGiB) << "still booked: not other programs' memory";
    EXPECT_EQ(st["devices"][0]["outside_bytes"], 0);
    run_for(1200ms);  // free_wait (1 s here) passed: released whatever the device says
    st = status();
    EXPECT_EQ(st["devices"][0]["own_bytes"], 0) << st["devices"].dump(2);
}

}  // namespace
}  // namespace loch::broker
