// Jobs through `loch run` against a real `loch serve` and the real llama-server (issue 28): a job holding the
// budget makes a chat request wait with the job named, then be served when it exits; a job waits for a busy
// engine and is granted once that engine is evicted; signals reach the job; exit codes pass through; a
// command that does not exist asks for nothing. The job is a real process that allocates and touches memory.
#include <future>
#include <thread>

#include <gtest/gtest.h>

#include "fixtures.hpp"

using namespace loch;
using namespace loch::itest;
using namespace std::chrono_literals;
using nlohmann::json;

namespace {

constexpr std::uint64_t kMiB = 1024 * 1024;

// What loch plans for `model` on the CPU, in bytes.
std::uint64_t planned_cpu(LochServer& loch, const std::string& model) {
    const auto p = json::parse(loch.post("/loch/plan", json{{"model", model}}.dump()).body);
    for (const auto& n : p["status"]["footprint"]["needs"])
        if (n["device"] == "cpu") return n["bytes"].get<std::uint64_t>();
    ADD_FAILURE() << p.dump(2);
    return 0;
}

// `loch run --url … ARGS…` as a process of its own (its own group, like a shell job).
test::Process loch_run(LochServer& loch, const test::TempDir& dir, const std::string& tag,
                       std::vector<std::string> args) {
    std::vector<std::string> all = {"run", "--url", "127.0.0.1:" + std::to_string(loch.port())};
    all.insert(all.end(), args.begin(), args.end());
    return test::Process(bin() / "loch", all, dir.path() / ("run-" + tag + ".log"));
}

// A job double: touches `mib` MiB (so that it is really resident), then sleeps `seconds`; SIGTERM ends it
// with status 42 after saying so.
std::vector<std::string> allocating_job(int mib, double seconds) {
    return {
        "--", "python3", "-c",
        "import signal,sys,time\n"
        "signal.signal(signal.SIGTERM, lambda *a: (print('job: got SIGTERM', flush=True), sys.exit(42)))\n"
        "b = b'\\x01' * (" +
            std::to_string(mib) +
            " * 2**20)\n"
            "print('job:', 'ho' + 'lding', len(b), flush=True)\n"
            "time.sleep(" +
            std::to_string(seconds) + ")\n"};
}

// The hold named `name` in /loch/status, once it is in `state` (or a null json after `limit`).
json hold_in_state(LochServer& loch, const std::string& name, const std::string& state,
                   std::chrono::seconds limit = 30s) {
    const auto until = std::chrono::steady_clock::now() + limit;
    while (std::chrono::steady_clock::now() < until) {
        const auto st = loch.status();
        for (const auto& h : st["holds"])
            if (h["name"] == name && h["state"] == state) return h;
        std::this_thread::sleep_for(100ms);
    }
    return {};
}

}  // namespace

TEST(Jobs, AJobHoldingTheBudgetMakesAChatWaitWithTheJobNamedThenItIsServed) {
    test::TempDir dir("loch-itest-jobs");
    LochServer loch(dir.path(), config(dir, "2GiB", model_entry("tiny", models().tiny.path(), kArgs)));
    const auto need = planned_cpu(loch, "tiny");
    ASSERT_GT(need, 0u);
    const auto hold_mib = (2048 * kMiB - need) / kMiB + 16;  // leaves less than the model needs
    auto job = loch_run(loch, dir, "holder", [&] {
        auto a = std::vector<std::string>{"--memory", std::to_string(hold_mib) + "MiB", "--name", "trainer"};
        const auto j = allocating_job(64, 6);
        a.insert(a.end(), j.begin(), j.end());
        return a;
    }());
    const auto granted = hold_in_state(loch, "trainer", "granted");
    ASSERT_FALSE(granted.is_null()) << job.log();
    EXPECT_EQ(granted["device"], "cpu");
    EXPECT_NE(granted.value("command", "").find("python3"), std::string::npos) << granted.dump(2);

    auto chat_reply = std::async(std::launch::async,
                                 [&] { return loch.post("/v1/chat/completions", chat("tiny", false, 4)); });
    // While it waits, /loch/status names the job as what holds the memory.
    std::string reason;
    for (int i = 0; i < 50 && reason.empty(); ++i) {
        std::this_thread::sleep_for(100ms);
        const auto st = loch.status();
        for (const auto& w : st["queue"]["waiting"])
            if (w.value("model", "") == "tiny") reason = w["reason"];
    }
    EXPECT_NE(reason.find("job:trainer"), std::string::npos) << reason;
    EXPECT_NE(chat_reply.wait_for(0s), std::future_status::ready) << "served while the job held the memory";

    // The job exits on its own: its hold goes, the request is served.
    ASSERT_EQ(job.wait_for(30s), 0) << job.log();
    const auto r = chat_reply.get();
    EXPECT_EQ(r.status, 200) << r.body;
    EXPECT_NE(job.log().find("granted"), std::string::npos) << job.log();
    const auto st = loch.status();
    EXPECT_TRUE(st["holds"].empty()) << st["holds"].dump(2);
}

TEST(Jobs, AJobWaitsForABusyEngineIsGrantedWhenItIsEvictedAndItsExitCodeComesBack) {
    test::TempDir dir("loch-itest-jobs");
    LochServer loch(dir.path(), config(dir, "2GiB", long_model()));
    const auto need = planned_cpu(loch, "tiny");
    SseClient stream(loch.port(), "/v1/chat/completions", long_stream("tiny"));
    ASSERT_EQ(stream.status(), 200);
    ASSERT_TRUE(stream.next_event());  // generating: the engine is busy
    const auto hold_mib = (2048 * kMiB - need) / kMiB + 16;
    auto job = loch_run(
        loch, dir, "waiter",
        {"--memory", std::to_string(hold_mib) + "MiB", "--name", "scan", "--", "sh", "-c", "exit 7"});
    const auto waiting = hold_in_state(loch, "scan", "waiting");
    ASSERT_FALSE(waiting.is_null()) << job.log();
    EXPECT_EQ(waiting["position"], 1);
    const std::string reason = waiting["reason"];
    EXPECT_NE(reason.find("tiny"), std::string::npos) << reason;
    EXPECT_NE(reason.find("busy"), std::string::npos) << reason;
    std::this_thread::sleep_for(1500ms);
    EXPECT_NE(job.log().find("position 1"), std::string::npos) << job.log();

    stream.close();  // the client leaves: the engine is idle, and evicted for the job
    EXPECT_EQ(job.wait_for(60s), 7) << job.log();
    EXPECT_EQ(loch.engine_status("tiny")["state"], "stopped");
    bool evicted = false;
    const auto st = loch.status();
    for (const auto& e : st["events"]) evicted |= e["kind"] == "evict" && e.value("for", "") == "job 'scan'";
    EXPECT_TRUE(evicted) << st["events"].dump(1);
}

TEST(Jobs, ASignalSentToLochRunReachesTheJobAndTheHoldIsReleased) {
    test::TempDir dir("loch-itest-jobs");
    LochServer loch(dir.path(), config(dir, "2GiB", model_entry("tiny", models().tiny.path(), kArgs)));
    auto job = loch_run(loch, dir, "signal", [] {
        auto a = std::vector<std::string>{"--memory", "256MiB", "--name", "sig"};
        const auto j = allocating_job(32, 60);
        a.insert(a.end(), j.begin(), j.end());
        return a;
    }());
    ASSERT_FALSE(hold_in_state(loch, "sig", "granted").is_null()) << job.log();
    for (int i = 0; i < 100 && job.log().find("job: holding") == std::string::npos; ++i)
        std::this_thread::sleep_for(50ms);
    ::kill(job.pid(), SIGTERM);  // to loch run alone, as systemd or `kill` would
    EXPECT_EQ(job.wait_for(20s), 42) << job.log();
    EXPECT_NE(job.log().find("job: got SIGTERM"), std::string::npos) << job.log();
    EXPECT_TRUE(loch.status()["holds"].empty());
}

TEST(Jobs, LochCancelOfARunningJobStopsItWithSigtermAndOfAWaitingOneRunsNothing) {
    test::TempDir dir("loch-itest-jobs");
    LochServer loch(dir.path(), config(dir, "2GiB", model_entry("tiny", models().tiny.path(), kArgs)));
    auto job = loch_run(loch, dir, "cancelled", [] {
        auto a = std::vector<std::string>{"--memory", "1500MiB", "--name", "scan"};
        const auto j = allocating_job(32, 120);
        a.insert(a.end(), j.begin(), j.end());
        return a;
    }());
    const auto granted = hold_in_state(loch, "scan", "granted");
    ASSERT_FALSE(granted.is_null()) << job.log();
    for (int i = 0; i < 100 && job.log().find("job: holding") == std::string::npos; ++i)
        std::this_thread::sleep_for(50ms);
    auto second = loch_run(loch, dir, "second", {"--memory", "1GiB", "--name", "later", "--", "true"});
    const auto waiting = hold_in_state(loch, "later", "waiting");
    ASSERT_FALSE(waiting.is_null()) << second.log();

    const auto cancel = [&](const std::string& id) {
        return test::run_to_completion(bin() / "loch",
                                       {"cancel", "--url", "127.0.0.1:" + std::to_string(loch.port()), id},
                                       dir.path() / ("cancel-" + id + ".log"), 30s);
    };
    EXPECT_EQ(cancel(waiting["id"]), 0);
    EXPECT_EQ(second.wait_for(20s), 1) << second.log();
    EXPECT_NE(second.log().find("cancelled"), std::string::npos) << second.log();
    EXPECT_NE(second.log().find("nothing was run"), std::string::npos) << second.log();

    EXPECT_EQ(cancel(granted["id"]), 0);
    EXPECT_EQ(job.wait_for(20s), 42) << job.log();  // the job's own SIGTERM handler
    EXPECT_NE(job.log().find("job: got SIGTERM"), std::string::npos) << job.log();
    EXPECT_NE(job.log().find("cancelled (loch cancel)"), std::string::npos) << job.log();
    EXPECT_TRUE(loch.status()["holds"].empty());
}

TEST(Jobs, AJobThatGrowsPastItsHoldIsMeasuredBookedAsMeasuredAndReportedWithBothNumbers) {
    test::TempDir dir("loch-itest-jobs");
    LochServer loch(dir.path(), config(dir, "2GiB", model_entry("tiny", models().tiny.path(), kArgs)));
    auto job = loch_run(loch, dir, "grows", [] {
        auto a = std::vector<std::string>{"--memory", "64MiB", "--name", "grower"};
        const auto j = allocating_job(400, 8);  // 400 MiB resident against a 64 MiB hold
        a.insert(a.end(), j.begin(), j.end());
        return a;
    }());
    json grew;
    for (int i = 0; i < 150 && grew.is_null(); ++i) {
        std::this_thread::sleep_for(100ms);
        const auto st = loch.status();
        for (const auto& e : st["events"])
            if (e["kind"] == "grew" && e.value("job", "") == "grower") grew = e;
    }
    ASSERT_FALSE(grew.is_null()) << job.log();
    EXPECT_EQ(grew["reserved_bytes"], 64 * kMiB) << grew.dump();
    EXPECT_GE(grew["measured_bytes"].get<std::uint64_t>(), 400 * kMiB) << grew.dump();
    EXPECT_NE(grew["message"].get<std::string>().find("more than its hold of 64.0 MiB"), std::string::npos)
        << grew.dump();
    const auto held = hold_in_state(loch, "grower", "granted");
    EXPECT_GE(held["bytes"].get<std::uint64_t>(), 400 * kMiB) << held.dump(2);  // booked as measured
    EXPECT_EQ(job.wait_for(30s), 0) << job.log();                               // never killed for it
}

TEST(Jobs, ACommandThatDoesNotExistAsksForNothingAndAHoldTooLargeIsRefusedAtOnce) {
    test::TempDir dir("loch-itest-jobs");
    LochServer loch(dir.path(), config(dir, "2GiB", model_entry("tiny", models().tiny.path(), kArgs)));
    auto missing = loch_run(loch, dir, "missing", {"--memory", "1GiB", "--", "no-such-command-xyz"});
    EXPECT_EQ(missing.wait_for(20s), 127);
    EXPECT_NE(missing.log().find("command not found"), std::string::npos) << missing.log();
    auto huge = loch_run(loch, dir, "huge", {"--memory", "64GiB", "--", "true"});
    EXPECT_EQ(huge.wait_for(20s), 1);
    EXPECT_NE(huge.log().find("can ever give"), std::string::npos) << huge.log();
    EXPECT_NE(huge.log().find("HTTP 503"), std::string::npos) << huge.log();
    EXPECT_TRUE(loch.status()["holds"].empty());
}

TEST(Jobs, AfterLochRestartsARunningJobReRegistersItsHoldAndKeepsRunning) {
    test::TempDir dir("loch-itest-jobs");
    const auto cfg = config(dir, "2GiB", model_entry("tiny", models().tiny.path(), kArgs));
    std::optional<LochServer> loch;
    loch.emplace(dir.path(), cfg);
    const auto port = loch->port();
    auto job = loch_run(*loch, dir, "restart", [] {
        auto a = std::vector<std::string>{"--memory", "300MiB", "--name", "long", "--ttl", "3s"};
        const auto j = allocating_job(32, 8);
        a.insert(a.end(), j.begin(), j.end());
        return a;
    }());
    ASSERT_FALSE(hold_in_state(*loch, "long", "granted").is_null()) << job.log();
    loch->expect_exit();
    loch.reset();  // SIGTERM: loch stops; the job does not
    EXPECT_TRUE(job.running()) << job.log();
    loch.emplace(dir.path(), cfg, std::vector<std::string>{}, port);
    const auto again = hold_in_state(*loch, "long", "granted", 15s);
    ASSERT_FALSE(again.is_null()) << job.log();
    EXPECT_EQ(again["device"], "cpu");
    EXPECT_GE(again["bytes"].get<std::uint64_t>(), 300 * kMiB);
    EXPECT_TRUE(again.contains("pgid")) << "measured again: " << again.dump(2);
    EXPECT_EQ(job.wait_for(30s), 0) << job.log();
    EXPECT_NE(job.log().find("re-registered"), std::string::npos) << job.log();
}
