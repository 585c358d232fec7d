// Cancel against a real `loch serve` and the real llama-server (issue 28): `loch cancel ID` and
// DELETE /loch/requests/{id} end a queued request (it never reaches the engine) and a running one (the engine
// is told to stop: its only slot is free at once, not after the long generation); the client gets a
// `cancelled` error it will not retry, a stream an SSE error event and a clean end. Ids are the
// X-Request-Id loch shows in GET /loch/requests and `loch status`.
#include <future>
#include <thread>

#include <gtest/gtest.h>

#include "fixtures.hpp"

using namespace loch;
using namespace loch::itest;
using namespace std::chrono_literals;
using nlohmann::json;

namespace {

// `loch cancel --url … IDS…`, run to completion: its exit status and output.
std::pair<int, std::string> loch_cancel(LochServer& loch, const test::TempDir& dir,
                                        const std::vector<std::string>& ids) {
    std::vector<std::string> args = {"cancel", "--url", "127.0.0.1:" + std::to_string(loch.port())};
    args.insert(args.end(), ids.begin(), ids.end());
    const auto log = dir.path() / "cancel.log";
    const int rc = test::run_to_completion(bin() / "loch", args, log, 30s);
    std::ifstream in(log);
    return {rc, std::string((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>())};
}

}  // namespace

TEST(Cancel, AQueuedRequestIsCancelledByLochCancelAndNeverReachesTheEngine) {
    test::TempDir dir("loch-itest-cancel");
    LochServer loch(dir.path(), config(dir, "2GiB", long_model()));
    SseClient running(loch.port(), "/v1/chat/completions", long_stream("tiny"));
    ASSERT_EQ(running.status(), 200);
    ASSERT_TRUE(running.next_event());  // generating: the only slot is taken
    auto queued = std::async(std::launch::async, [&] {
        return loch.post_as("wait-1", "/v1/chat/completions", chat("tiny", false, 4));
    });
    const auto listed = loch.in_flight("wait-1", "queued");
    ASSERT_FALSE(listed.is_null()) << loch.get("/loch/requests").body;
    EXPECT_EQ(listed["model"], "tiny");
    // `loch status` shows the id that `loch cancel` takes.
    const auto st = loch.status();
    bool shown = false;
    for (const auto& w : st["queue"]["waiting"]) shown |= w.value("request", "") == "wait-1";
    EXPECT_TRUE(shown) << st["queue"].dump(1);

    const auto [rc, out] = loch_cancel(loch, dir, {"wait-1"});
    EXPECT_EQ(rc, 0) << out;
    EXPECT_NE(out.find("cancelled wait-1 (queued for model 'tiny'"), std::string::npos) << out;
    ASSERT_EQ(queued.wait_for(10s), std::future_status::ready) << "the cancelled request still waits";
    const auto r = queued.get();
    EXPECT_EQ(r.status, 409) << r.body;
    EXPECT_EQ(json::parse(r.body)["error"]["type"], "cancelled") << r.body;
    EXPECT_EQ(r.header("x-should-retry").value_or(""), "false");
    EXPECT_TRUE(loch.in_flight("wait-1", "queued", 0s).is_null());
    EXPECT_TRUE(running.next_event()) << "the running stream is untouched";

    // Nothing by that id any more: a clear 404, and `loch cancel` says so with status 1.
    const auto again = loch.del("/loch/requests/wait-1");
    EXPECT_EQ(again.status, 404) << again.body;
    const auto [rc2, out2] = loch_cancel(loch, dir, {"wait-1"});
    EXPECT_EQ(rc2, 1) << out2;
    EXPECT_NE(out2.find("nothing in flight"), std::string::npos) << out2;
}

TEST(Cancel, ARunningStreamEndsWithAnErrorEventAndItsSlotIsFreeAtOnce) {
    test::TempDir dir("loch-itest-cancel");
    LochServer loch(dir.path(), config(dir, "2GiB", long_model()));
    SseClient running(loch.port(), "/v1/chat/completions", long_stream("tiny"));
    ASSERT_EQ(running.status(), 200);
    ASSERT_TRUE(running.next_event());
    const auto listed = loch.in_flight("", "running");
    ASSERT_FALSE(listed.is_null()) << loch.get("/loch/requests").body;
    EXPECT_EQ(listed["cancellable"], true);
    const std::string id = listed["id"];

    const auto answer = loch.del("/loch/requests/" + id);
    ASSERT_EQ(answer.status, 200) << answer.body;
    EXPECT_EQ(json::parse(answer.body)["cancelled"][0]["state"], "running") << answer.body;
    // The stream: an SSE error event naming the cancel, then a clean end.
    json error;
    int events = 0;
    while (auto ev = running.next_event(30s)) {
        if (ev->find("event: error") != std::string::npos) error = event_json(*ev);
        ASSERT_LT(++events, 100000);
    }
    ASSERT_FALSE(error.is_null()) << "no error event before the end of the stream";
    EXPECT_EQ(error["error"]["type"], "cancelled") << error.dump();
    EXPECT_NE(error["error"]["message"].get<std::string>().find(id), std::string::npos) << error.dump();

    // The engine stopped the 30000-token generation: its one slot answers a short request now (had it kept
    // generating, this would wait for the rest of it, a minute or more on two cores).
    const auto started = std::chrono::steady_clock::now();
    const auto next = loch.post("/v1/chat/completions", chat("tiny", false, 4));
    EXPECT_EQ(next.status, 200) << next.body;
    EXPECT_LT(std::chrono::steady_clock::now() - started, 20s) << "the engine kept the cancelled request";
    EXPECT_TRUE(json::parse(loch.get("/loch/requests").body)["requests"].empty());

    // A non-streamed one likewise: a 409 `cancelled` JSON answer, and the slot free at once.
    auto plain = std::async(std::launch::async, [&] {
        return loch.post_as("plain-1", "/v1/chat/completions",
                            chat("tiny", false, 30000, R"({"ignore_eos":true})"));
    });
    ASSERT_FALSE(loch.in_flight("plain-1", "running").is_null());
    std::this_thread::sleep_for(300ms);
    EXPECT_EQ(loch.del("/loch/requests/plain-1").status, 200);
    ASSERT_EQ(plain.wait_for(10s), std::future_status::ready);
    const auto r = plain.get();
    EXPECT_EQ(r.status, 409) << r.body;
    EXPECT_EQ(json::parse(r.body)["error"]["type"], "cancelled") << r.body;
    const auto again = std::chrono::steady_clock::now();
    EXPECT_EQ(loch.post("/v1/chat/completions", chat("tiny", false, 4)).status, 200);
    EXPECT_LT(std::chrono::steady_clock::now() - again, 20s) << "the engine kept the cancelled request";
}
