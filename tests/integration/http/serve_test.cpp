// End to end: `loch serve` as a process, the real pinned llama-server, loch-synth models, the CPU device with
// a small configured budget.
#include <signal.h>

#include <atomic>
#include <future>
#include <thread>

#include <gtest/gtest.h>
#include <boost/asio/connect.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/write.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>

#include "fixtures.hpp"
#include "http/sse.hpp"

using namespace loch;
using namespace loch::itest;
using namespace std::chrono_literals;
using nlohmann::json;

class Serve : public ::testing::Test {
  protected:
    void SetUp() override { (void)models(); }
    test::TempDir dir{"loch-itest-http"};
};

TEST_F(Serve, StartsTheEngineOnDemandAndAnswers) {
    LochServer loch(dir.path(), config(dir, "512MiB", model_entry("tiny", models().tiny.path(), kArgs)));
    auto list = json::parse(loch.get("/v1/models").body);
    ASSERT_EQ(list["data"].size(), 1u);
    EXPECT_EQ(list["data"][0]["id"], "tiny");
    EXPECT_EQ(list["data"][0]["loch"]["state"], "stopped");

    auto r = loch.post("/v1/chat/completions", chat("tiny", false, 8));
    ASSERT_EQ(r.status, 200) << r.body;
    auto j = json::parse(r.body);
    EXPECT_TRUE(j["choices"][0]["message"].contains("content"));

    auto e = loch.engine_status("tiny");
    EXPECT_EQ(e["state"], "ready");
    EXPECT_EQ(e["device"], "cpu");
    // The reservation is never under what the engine holds: its log's buffers, and its resident memory.
    const auto reserved = e["reservation"]["bytes"].get<std::uint64_t>();
    EXPECT_GE(reserved, e["measured"]["bytes"].get<std::uint64_t>()) << e.dump(2);
    std::ifstream st("/proc/" + std::to_string(e["engine"]["pid"].get<int>()) + "/status");
    std::string line;
    std::uint64_t rss_kib = 0;
    while (std::getline(st, line))
        if (line.starts_with("VmRSS:")) rss_kib = std::stoull(line.substr(6));
    EXPECT_GT(rss_kib, 0u);
    EXPECT_GE(reserved, rss_kib * 1024) << e.dump(2);
    EXPECT_NE(e["reservation"]["detail"].get<std::string>().find("largest of"), std::string::npos);

    auto log = loch.get("/loch/engines/tiny/log?lines=5");
    ASSERT_EQ(log.status, 200) << log.body;
    const auto lines = json::parse(log.body)["lines"];
    EXPECT_GT(lines.size(), 0u);
    EXPECT_LE(lines.size(), 5u);
}

// Cold start (issue 9): an engine that loads for longer than loch's first fast polls and says in its log when
// it is ready (tests/doubles/ready_later.py, ready 0.8 s after start, as llama-server's "server is
// listening") is polled when it writes that line, not on loch's own backed-off schedule (which left up to 250
// ms between the engine's readiness and the next poll). The double reports how long after its readiness the
// first poll came.
TEST_F(Serve, AnEngineThatSaysItIsReadyInItsLogIsPolledThenNotOnASchedule) {
    const auto report = dir.path() / "ready_ms";
    const std::string entry =
        "  - name: later\n    engine: command\n    memory: 64MiB\n    keep_alive: 0\n    command:\n"
        "      argv: [python3, " +
        (fs::path(LOCH_SOURCE_DIR) / "tests/doubles/ready_later.py").string() + ", \"{port}\", \"0.8\", " +
        report.string() + "]\n";
    LochServer loch(dir.path(), config(dir, "512MiB", entry));
    for (int run = 0; run < 3; ++run) {
        SCOPED_TRACE("cold start " + std::to_string(run + 1));
        fs::remove(report);
        const auto r = loch.post("/v1/chat/completions", chat("later", false, 1));
        ASSERT_EQ(r.status, 200) << r.body;
        std::ifstream in(report);
        double ms = -1;
        ASSERT_TRUE(in >> ms) << "the double saw no poll after its readiness";
        std::printf("cold start %d: loch's first poll %.1f ms after the engine was ready\n", run + 1, ms);
        // The wake and one poll take a millisecond or two (more under ASan on a busy machine); the schedule
        // alone was 0–250 ms.
        EXPECT_LT(ms, 50.0) << "the first poll came " << ms << " ms after the engine said it was ready";
        // keep_alive 0: the engine stops after the answer, and the next request starts it again.
        for (int i = 0; i < 100 && loch.engine_status("later")["state"] != "stopped"; ++i)
            std::this_thread::sleep_for(50ms);
    }
}

TEST_F(Serve, ApiKeysAreRequiredWhenConfigured) {
    LochServer loch(dir.path(), config(dir, "512MiB", model_entry("tiny", models().tiny.path(), kArgs),
                                       "api_keys:\n  - sk-test\n"));
    EXPECT_EQ(loch.get("/health").status, 200);
    auto r = loch.get("/v1/models");
    EXPECT_EQ(r.status, 401);
    EXPECT_EQ(json::parse(r.body)["error"]["type"], "unauthorized");
    test::HttpRequest req;
    req.port = loch.port();
    req.target = "/v1/models";
    req.headers["Authorization"] = "Bearer sk-test";
    EXPECT_EQ(test::http_request(req).status, 200);
    req.headers["Authorization"] = "Bearer sk-wrong";
    EXPECT_EQ(test::http_request(req).status, 401);
}

TEST_F(Serve, StreamThroughLochEqualsTheEnginesOwnStream) {
    LochServer loch(dir.path(), config(dir, "512MiB", model_entry("tiny", models().tiny.path(), kArgs)));
    const std::string body = chat("tiny", true, 24);
    auto collect = [&](std::uint16_t port) {
        SseClient c(port, "/v1/chat/completions", body);
        EXPECT_EQ(c.status(), 200);
        EXPECT_TRUE(c.content_type().starts_with("text/event-stream"));
        std::vector<std::string> events;
        while (auto e = c.next_event()) events.push_back(*e);
        return events;
    };
    auto through_loch = collect(loch.port());
    test::EngineProcess direct(models().tiny.path(),
                               {{"-c", "4096", "-np", "1", "-t", "1", "--device", "none"}});
    auto from_engine = collect(direct.port());
    ASSERT_EQ(through_loch.size(), from_engine.size());
    ASSERT_GT(through_loch.size(), 3u);
    for (std::size_t i = 0; i < through_loch.size(); ++i) {
        auto a = event_json(through_loch[i]), b = event_json(from_engine[i]);
        if (a.is_null() || b.is_null() || a.is_discarded()) {
            EXPECT_EQ(through_loch[i], from_engine[i]);
            continue;
        }
        // Volatile fields differ between two runs; the content must not.
        for (auto* x : {&a, &b})
            for (const char* k : {"id", "created", "timings", "system_fingerprint", "model"}) x->erase(k);
        EXPECT_EQ(a, b) << "event " << i;
    }
    EXPECT_TRUE(http::is_done_event(through_loch.back()));
}

TEST_F(Serve, SecondModelEvictsTheFirstAndBothSucceed) {
    // Each needs ~14 MiB of buffers + the process overhead (loch plan); 100 MiB holds one.
    LochServer loch(dir.path(), config(dir, "100MiB",
                                       model_entry("a", models().tiny.path(), kArgs) +
                                           model_entry("b", models().tiny2.path(), kArgs)));
    auto ra = loch.post("/v1/chat/completions", chat("a", false, 4));
    ASSERT_EQ(ra.status, 200) << ra.body;
    auto rb = loch.post("/v1/chat/completions", chat("b", false, 4));
    ASSERT_EQ(rb.status, 200) << rb.body;
    auto a = loch.engine_status("a"), b = loch.engine_status("b");
    EXPECT_EQ(a["state"], "stopped") << a.dump(2);
    EXPECT_NE(a["last_stop_reason"].get<std::string>().find("evicted"), std::string::npos);
    EXPECT_EQ(b["state"], "ready");
}

TEST_F(Serve, ModelThatCanNeverFitIsRefusedAtOnceWithNumbers) {
    LochServer loch(dir.path(), config(dir, "8MiB", model_entry("demo", models().demo.path(), kArgs)));
    const auto t0 = std::chrono::steady_clock::now();
    auto r = loch.post("/v1/chat/completions", chat("demo", false, 4));
    EXPECT_LT(std::chrono::steady_clock::now() - t0, 10s);
    ASSERT_EQ(r.status, 503) << r.body;
    auto e = json::parse(r.body)["error"];
    EXPECT_EQ(e["type"], "insufficient_memory");
    EXPECT_GT(e["need_bytes"].get<std::uint64_t>(), 8ull << 20);
    EXPECT_EQ(e["capacity_bytes"].get<std::uint64_t>(), 8ull << 20);
    EXPECT_TRUE(e.contains("largest_free_bytes"));
    EXPECT_FALSE(e["would_help"].empty());
    // And /loch/plan says the same without trying.
    auto p = json::parse(loch.post("/loch/plan", R"({"model":"demo"})").body);
    EXPECT_EQ(p["admission"]["decision"], "refuse");
    EXPECT_FALSE(p["would_admit_now"].get<bool>());
}

TEST_F(Serve, RequestsBeyondSlotsQueueAndCompleteAndAFullQueueIs429) {
    LochServer loch(dir.path(),
                    config(dir, "512MiB", long_model(), "queue:\n  interactive: 1\n  batch: 1\n"));
    // Warm up so that the three requests race for the slot, not for the start.
    ASSERT_EQ(loch.post("/v1/chat/completions", chat("tiny", false, 2)).status, 200);
    SseClient first(loch.port(), "/v1/chat/completions", long_stream("tiny"));
    ASSERT_EQ(first.status(), 200);
    ASSERT_TRUE(first.next_event());  // it holds the only slot now
    auto second = std::async(std::launch::async,
                             [&] { return loch.post("/v1/chat/completions", chat("tiny", false, 4)); });
    // Wait until the second is queued, then the third finds the queue full.
    for (int i = 0; i < 100 && loch.status()["queue"]["interactive"] != 1; ++i)
        std::this_thread::sleep_for(50ms);
    ASSERT_EQ(loch.status()["queue"]["interactive"], 1);
    auto third = loch.post("/v1/chat/completions", chat("tiny", false, 4));
    EXPECT_EQ(third.status, 429) << third.body;
    EXPECT_EQ(json::parse(third.body)["error"]["type"], "queue_full");
    ASSERT_TRUE(third.header("retry-after"));
    EXPECT_GE(std::stoi(*third.header("retry-after")), 1);
    first.close();  // frees the slot (and cancels the long generation)
    auto r2 = second.get();
    EXPECT_EQ(r2.status, 200) << r2.body;
}

TEST_F(Serve, IdleModelIsStoppedAfterItsKeepAliveAndStartsAgainOnDemand) {
    LochServer loch(
        dir.path(),
        config(dir, "512MiB", model_entry("tiny", models().tiny.path(), kArgs + "    keep_alive: 1s\n")));
    ASSERT_EQ(loch.post("/v1/chat/completions", chat("tiny", false, 2)).status, 200);
    json e = loch.engine_status("tiny");
    for (int i = 0; i < 200 && e["state"] != "stopped"; ++i) {
        std::this_thread::sleep_for(100ms);
        e = loch.engine_status("tiny");
    }
    ASSERT_EQ(e["state"], "stopped") << e.dump(2);
    EXPECT_NE(e["last_stop_reason"].get<std::string>().find("keep_alive"), std::string::npos) << e.dump(2);
    EXPECT_EQ(loch.post("/v1/chat/completions", chat("tiny", false, 2)).status, 200);
}

// While an exclusive model streams, another model on the same device waits for the device lock; without
// `exclusive` the same request is answered during the stream (the control that shows the lock is what waits).
TEST_F(Serve, ExclusiveModelHoldsTheDeviceWhileItRuns) {
    for (const bool exclusive : {true, false}) {
        SCOPED_TRACE(exclusive ? "exclusive" : "shared");
        const std::string flag = exclusive ? "    exclusive: true\n" : "";
        test::TempDir d{"loch-itest-excl"};
        LochServer loch(
            d.path(),
            config(d, "512MiB", long_model(flag) + model_entry("other", models().tiny2.path(), kArgs)));
        ASSERT_EQ(loch.post("/v1/chat/completions", chat("tiny", false, 2)).status, 200);
        ASSERT_EQ(loch.post("/v1/chat/completions", chat("other", false, 2)).status, 200);
        SseClient first(loch.port(), "/v1/chat/completions", long_stream("tiny"));
        ASSERT_EQ(first.status(), 200);
        ASSERT_TRUE(first.next_event());  // tiny is running a request now
        auto second = std::async(std::launch::async,
                                 [&] { return loch.post("/v1/chat/completions", chat("other", false, 2)); });
        const bool answered_during_stream = second.wait_for(10s) == std::future_status::ready;
        EXPECT_EQ(answered_during_stream, !exclusive);
        first.close();  // ends tiny's request and releases the lock
        auto r = second.get();
        EXPECT_EQ(r.status, 200) << r.body;
    }
}

TEST_F(Serve, EngineCrashMidStreamGivesAnSseErrorEvent) {
    LochServer loch(dir.path(), config(dir, "512MiB", long_model()));
    SseClient c(loch.port(), "/v1/chat/completions", long_stream("tiny"));
    ASSERT_EQ(c.status(), 200);
    ASSERT_TRUE(c.next_event());
    auto pid = loch.engine_pid("tiny");
    ASSERT_TRUE(pid);
    ::kill(*pid, SIGSEGV);
    std::optional<std::string> last;
    while (auto e = c.next_event(30s)) last = e;
    ASSERT_TRUE(last);
    EXPECT_TRUE(last->starts_with("event: error")) << *last;
    auto j = event_json(*last);
    EXPECT_EQ(j["error"]["type"], "engine_failed") << *last;
    EXPECT_NE(j["error"]["message"].get<std::string>().find("SIGSEGV"), std::string::npos) << *last;
    // The next request restarts the engine.
    EXPECT_EQ(loch.post("/v1/chat/completions", chat("tiny", false, 2)).status, 200);
}

TEST_F(Serve, EngineCrashBeforeAnswerGives502Json) {
    LochServer loch(dir.path(), config(dir, "512MiB", long_model()));
    ASSERT_EQ(loch.post("/v1/chat/completions", chat("tiny", false, 2)).status, 200);
    auto pid = loch.engine_pid("tiny");
    ASSERT_TRUE(pid);
    ::kill(*pid, SIGSTOP);  // it accepts the connection but never answers...
    auto fut = std::async(std::launch::async, [&] {
        return loch.post("/v1/chat/completions", chat("tiny", false, 30000, R"({"ignore_eos":true})"));
    });
    std::this_thread::sleep_for(500ms);
    ::kill(*pid, SIGSEGV);  // ...and dies when continued
    ::kill(*pid, SIGCONT);
    auto r = fut.get();
    EXPECT_EQ(r.status, 502) << r.body;
    EXPECT_EQ(json::parse(r.body)["error"]["type"], "engine_failed");
}

TEST_F(Serve, StoppedEngineTripsTheWatchdog) {
    LochServer loch(dir.path(), config(dir, "512MiB", long_model("    watchdog: 2s\n")));
    SseClient c(loch.port(), "/v1/chat/completions", long_stream("tiny"));
    ASSERT_EQ(c.status(), 200);
    ASSERT_TRUE(c.next_event());
    auto pid = loch.engine_pid("tiny");
    ASSERT_TRUE(pid);
    ::kill(*pid, SIGSTOP);
    const auto t0 = std::chrono::steady_clock::now();
    std::optional<std::string> last;
    while (auto e = c.next_event(30s)) last = e;
    ::kill(*pid, SIGCONT);
    ASSERT_TRUE(last);
    EXPECT_LT(std::chrono::steady_clock::now() - t0, 25s);  // 2 s watchdog; generous on a loaded machine
    EXPECT_EQ(event_json(*last)["error"]["type"], "watchdog_timeout") << *last;
}

TEST_F(Serve, ClientDisconnectCancelsTheEngineRequest) {
    LochServer loch(dir.path(), config(dir, "512MiB", long_model()));
    {
        SseClient c(loch.port(), "/v1/chat/completions", long_stream("tiny"));
        ASSERT_EQ(c.status(), 200);
        ASSERT_TRUE(c.next_event());
        c.close();
    }
    const auto e = loch.engine_status("tiny");
    const std::uint16_t engine_port = e["engine"]["port"].get<std::uint16_t>();
    const int engine_pid = e["engine"]["pid"].get<int>();
    bool idle = false;
    for (int i = 0; i < 100 && !idle; ++i) {
        auto slots = json::parse(engine_get(engine_pid, engine_port, "/slots").body, nullptr, false);
        idle = slots.is_array() && !slots.empty() && slots[0]["is_processing"] == false;
        if (!idle) std::this_thread::sleep_for(100ms);
    }
    EXPECT_TRUE(idle) << "the engine kept generating for a client that was gone";
    // And loch freed the slot: the next request gets it at once.
    EXPECT_EQ(loch.engine_status("tiny")["active_requests"], 0);
}

namespace {
namespace asio = boost::asio;
namespace bhttp = boost::beast::http;

std::string raw_request(const std::string& body) {
    return "POST /v1/chat/completions HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n"
           "Content-Length: " +
           std::to_string(body.size()) + "\r\n\r\n" + body;
}

// Reads one whole response from `sock` (with what `buf` already holds); the status, and the body.
std::pair<unsigned, std::string> read_response(asio::ip::tcp::socket& sock, boost::beast::flat_buffer& buf) {
    bhttp::response<bhttp::string_body> res;
    bhttp::read(sock, buf, res);
    return {res.result_int(), res.body()};
}
}  // namespace

// The connection's next read starts while a request is at its engine (it is also how a hang-up is heard):
// a request that arrives then, or one pipelined behind the first in the same write, is answered in turn.
TEST_F(Serve, PipelinedRequestsOnOneConnectionAreEachAnsweredInTurn) {
    LochServer loch(dir.path(), config(dir, "512MiB", model_entry("tiny", models().tiny.path(), kArgs)));
    ASSERT_EQ(loch.post("/v1/chat/completions", chat("tiny", false, 2)).status, 200);
    asio::io_context ioc;
    asio::ip::tcp::socket sock(ioc);
    sock.connect({asio::ip::make_address("127.0.0.1"), loch.port()});
    struct timeval tv {
        30, 0
    };
    ::setsockopt(sock.native_handle(), SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
    boost::beast::flat_buffer buf;
    // Both in one write: the second is already buffered when the first is relayed.
    asio::write(sock,
                asio::buffer(raw_request(chat("tiny", false, 4)) + raw_request(chat("tiny", false, 2))));
    for (int i = 0; i < 2; ++i) {
        const auto [status, body] = read_response(sock, buf);
        EXPECT_EQ(status, 200u) << body;
        EXPECT_TRUE(json::parse(body)["choices"][0]["message"].contains("content")) << body;
    }
    // The second sent while the first is generating: the early read takes it, and it is answered next.
    asio::write(sock, asio::buffer(raw_request(chat("tiny", false, 64, R"({"ignore_eos":true})"))));
    std::this_thread::sleep_for(100ms);
    asio::write(sock, asio::buffer(raw_request(chat("tiny", false, 2))));
    const auto [s1, b1] = read_response(sock, buf);
    EXPECT_EQ(s1, 200u) << b1;
    EXPECT_EQ(json::parse(b1)["usage"]["completion_tokens"], 64) << b1;
    const auto [s2, b2] = read_response(sock, buf);
    EXPECT_EQ(s2, 200u) << b2;
    // And the connection stays usable for a third.
    asio::write(sock, asio::buffer(raw_request(chat("tiny", false, 2))));
    EXPECT_EQ(read_response(sock, buf).first, 200u);
    EXPECT_EQ(loch.get("/health").status, 200);
}

// A client that hangs up on a non-streamed request is heard by the connection's early read: loch ends the
// request as 499 client_gone at once, closes the engine connection and frees the slot in its own books.
// (The pinned llama-server itself finishes a non-streamed generation whose connection closed; a stream it
// stops: ClientDisconnectCancelsTheEngineRequest.)
TEST_F(Serve, AClientThatHangsUpOnANonStreamedRequestIsHeardAtOnce) {
    LochServer loch(dir.path(), config(dir, "512MiB", long_model()));
    ASSERT_EQ(loch.post("/v1/chat/completions", chat("tiny", false, 2)).status, 200);
    {
        asio::io_context ioc;
        asio::ip::tcp::socket sock(ioc);
        sock.connect({asio::ip::make_address("127.0.0.1"), loch.port()});
        asio::write(sock, asio::buffer(raw_request(chat("tiny", false, 3000, R"({"ignore_eos":true})"))));
        std::this_thread::sleep_for(300ms);
        ASSERT_EQ(loch.engine_status("tiny")["active_requests"], 1);
    }  // closed
    bool heard = false;
    for (int i = 0; i < 50 && !heard; ++i) {
        heard = loch.log().find("\"outcome\":\"client_gone\"") != std::string::npos;
        if (!heard) std::this_thread::sleep_for(20ms);
    }
    EXPECT_TRUE(heard) << loch.log();
    EXPECT_EQ(loch.engine_status("tiny")["active_requests"], 0);
    EXPECT_EQ(loch.get("/health").status, 200);
}

TEST_F(Serve, LochKilledWithSigkillLeavesNoEngine) {
    std::optional<int> pid;
    {
        LochServer loch(dir.path(), config(dir, "512MiB", model_entry("tiny", models().tiny.path(), kArgs)));
        ASSERT_EQ(loch.post("/v1/chat/completions", chat("tiny", false, 2)).status, 200);
        pid = loch.engine_pid("tiny");
        ASSERT_TRUE(pid);
        ASSERT_TRUE(process_alive(*pid));
        loch.expect_exit();
        ::kill(loch.process().pid(), SIGKILL);
        loch.process().wait_for(5s);
    }
    bool gone = false;
    for (int i = 0; i < 100 && !gone; ++i) {
        gone = !process_alive(*pid);
        if (!gone) std::this_thread::sleep_for(50ms);
    }
    EXPECT_TRUE(gone) << "engine pid " << *pid << " survived loch";
}

// Ctrl-C twice: the first signal lets a running stream finish (up to stop_grace), the second ends loch at
// once, its engine killed with it.
TEST_F(Serve, ASecondSignalEndsLochAtOnceAndKillsItsEngine) {
    std::optional<int> pid;
    {
        LochServer loch(dir.path(), config(dir, "512MiB", long_model(), "stop_grace: 60s\n"));
        SseClient c(loch.port(), "/v1/chat/completions", long_stream("tiny"));
        ASSERT_EQ(c.status(), 200);
        ASSERT_TRUE(c.next_event());
        pid = loch.engine_pid("tiny");
        ASSERT_TRUE(pid);
        loch.expect_exit();
        ::kill(loch.process().pid(), SIGTERM);
        EXPECT_FALSE(loch.process().wait_for(500ms)) << "the first signal waits for the running stream";
        const auto asked = std::chrono::steady_clock::now();
        ::kill(loch.process().pid(), SIGINT);
        const auto status = loch.process().wait_for(5s);
        ASSERT_TRUE(status) << "loch still runs after a second signal";
        EXPECT_LT(std::chrono::steady_clock::now() - asked, 2s);
        EXPECT_EQ(*status, 128 + SIGINT);
        EXPECT_NE(loch.log().find("again: exiting now, 1 engine(s) killed"), std::string::npos) << loch.log();
    }
    bool gone = false;
    for (int i = 0; i < 100 && !gone; ++i) {
        gone = !process_alive(*pid);
        if (!gone) std::this_thread::sleep_for(50ms);
    }
    EXPECT_TRUE(gone) << "engine pid " << *pid << " survived loch";
}

TEST_F(Serve, BadRequestsGet4xxJson) {
    LochServer loch(dir.path(), config(dir, "512MiB", model_entry("tiny", models().tiny.path(), kArgs),
                                       "max_body: 64KiB\n"));
    auto r = loch.post("/v1/chat/completions", "{\"model\": \"tiny\", ");
    EXPECT_EQ(r.status, 400);
    EXPECT_EQ(json::parse(r.body)["error"]["type"], "invalid_request");
    r = loch.post("/v1/chat/completions", chat("nope", false, 2));
    EXPECT_EQ(r.status, 404);
    EXPECT_EQ(json::parse(r.body)["error"]["type"], "model_not_found");
    r = loch.post("/v1/chat/completions", std::string(100 * 1024, ' '));
    EXPECT_EQ(r.status, 413);
    EXPECT_EQ(json::parse(r.body)["error"]["type"], "request_too_large");
    r = loch.get("/v1/nothing");
    EXPECT_EQ(r.status, 404);
    EXPECT_EQ(json::parse(r.body)["error"]["type"], "not_found");
}

TEST_F(Serve, PromptPlusMaxTokensBeyondTheSlotIs400WithNumbers) {
    LochServer loch(dir.path(),
                    config(dir, "512MiB",
                           model_entry("tiny", models().tiny.path(),
                                       "    args:\n      ctx: 512\n      parallel: 2\n      threads: 1\n")));
    // max_tokens alone beyond the slot: refused before any engine starts.
    auto r = loch.post("/v1/chat/completions", chat("tiny", false, 1000));
    ASSERT_EQ(r.status, 400) << r.body;
    auto e = json::parse(r.body)["error"];
    EXPECT_EQ(e["type"], "context_length_exceeded");
    EXPECT_EQ(e["slot_ctx"], 256);
    EXPECT_EQ(e["max_tokens"], 1000);
    // What would fit and what it would take (issue 53): the largest max_tokens, the ctx that gives the
    // slot, within the model's training context.
    EXPECT_EQ(e["largest_max_tokens"], 255);
    EXPECT_EQ(e["needed_slot_ctx"], 1001);
    EXPECT_NE(e["message"].get<std::string>().find("raise args.ctx of model 'tiny' to 2048"),
              std::string::npos)
        << e["message"];
    EXPECT_EQ(loch.engine_status("tiny")["state"], "stopped") << "an engine was started for a junk request";
    EXPECT_EQ(loch.engine_status("tiny")["runs"], 0);
    // A long prompt plus a max_tokens that fits alone: counted by the engine's tokenizer.
    std::string words;
    for (int i = 0; i < 300; ++i) words += "word ";
    json body = json::parse(chat("tiny", false, 100));
    body["messages"][0]["content"] = words;
    r = loch.post("/v1/chat/completions", body.dump());
    ASSERT_EQ(r.status, 400) << r.body;
    e = json::parse(r.body)["error"];
    EXPECT_EQ(e["type"], "context_length_exceeded");
    EXPECT_GT(e["prompt_tokens"].get<int>(), 100);
    EXPECT_EQ(e["counted_by"], "engine /tokenize");
    const int prompt = e["prompt_tokens"].get<int>();
    EXPECT_EQ(e["largest_max_tokens"].get<int>(), std::max(0, 256 - prompt));
    EXPECT_EQ(e["needed_slot_ctx"].get<int>(), prompt + 100);
    EXPECT_EQ(e["model_slot_ctx_limit"], 32768);  // tiny-llama's training context
    EXPECT_NE(
        e["message"].get<std::string>().find(prompt < 256 ? "fits with this prompt" : "the prompt alone"),
        std::string::npos)
        << e["message"];
}

// Issue 53: a ctx above the training context is either refused at config time or stretched with YaRN; the
// real engine then gives every slot the context loch booked (it capped it at the training context before).
TEST_F(Serve, AContextBeyondTheTrainingContextIsStretchedAndTheEngineGivesAllOfIt) {
    const test::SynthModel short_ctx({"--preset", "tiny-llama", "--weights", "small", "--ctx", "1024"},
                                     "short.gguf");
    LochServer loch(dir.path(), config(dir, "512MiB",
                                       model_entry("tiny", short_ctx.path(),
                                                   "    args:\n      ctx: 4096\n      parallel: 1\n"
                                                   "      threads: 1\n      ctx_extension: yarn\n")));
    ASSERT_EQ(loch.post("/v1/chat/completions", chat("tiny", false, 2)).status, 200);
    EXPECT_EQ(loch.engine_status("tiny")["slot_ctx"], 4096) << loch.engine_status("tiny").dump();
    // A prompt past the training context but within the stretched slot is served, not refused.
    std::string words;
    for (int i = 0; i < 700; ++i) words += "word ";
    json body = json::parse(chat("tiny", false, 4));
    body["messages"][0]["content"] = words;
    const auto r = loch.post("/v1/chat/completions", body.dump());
    ASSERT_EQ(r.status, 200) << r.body;
    EXPECT_GT(json::parse(r.body)["usage"]["prompt_tokens"].get<int>(), 1024);
}

TEST_F(Serve, OllamaClientsCanListModelsAndOpenAIClientsCanAskForOne) {
    LochServer loch(dir.path(), config(dir, "512MiB",
                                       model_entry("tiny", models().tiny.path(),
                                                   "    aliases: [org/tiny]\n" + std::string(kArgs))));
    const auto version = loch.get("/api/version");
    ASSERT_EQ(version.status, 200);
    EXPECT_TRUE(json::parse(version.body).contains("version"));
    const auto tags = json::parse(loch.get("/api/tags").body);
    ASSERT_EQ(tags["models"].size(), 1u);
    EXPECT_EQ(tags["models"][0]["name"], "tiny");
    EXPECT_EQ(json::parse(loch.get("/api/ps").body)["models"].size(), 0u);  // nothing running yet
    const auto answer = loch.post("/v1/chat/completions", chat("org/tiny", false, 2));
    ASSERT_EQ(answer.status, 200);
    EXPECT_EQ(json::parse(answer.body)["model"], "tiny") << answer.body;  // its name, not its file
    const auto ps = json::parse(loch.get("/api/ps").body);
    ASSERT_EQ(ps["models"].size(), 1u);
    EXPECT_GT(ps["models"][0]["size"].get<std::uint64_t>(), 0u);  // its reservation
    const auto one = loch.get("/v1/models/org/tiny");
    ASSERT_EQ(one.status, 200) << one.body;
    EXPECT_EQ(json::parse(one.body)["id"], "tiny");
    EXPECT_EQ(loch.get("/v1/models/nope").status, 404);
    const auto pull = loch.post("/api/pull", R"({"model":"llama3"})");
    EXPECT_EQ(pull.status, 400);
    EXPECT_NE(pull.body.find("does not download models"), std::string::npos) << pull.body;
}

TEST_F(Serve, ConfigErrorsNameFileAndLine) {
    const auto cfg = dir.path() / "bad.yaml";
    std::ofstream(cfg)
        << "listen: 127.0.0.1\nmodels:\n  - name: x\n    path: /nonexistent.gguf\n    colour: red\n";
    test::Process p(bin() / "loch", {"serve", "--config", cfg.string()}, dir.path() / "bad.log");
    auto st = p.wait_for(20s);
    ASSERT_TRUE(st);
    EXPECT_NE(*st, 0);
    EXPECT_NE(p.log().find("bad.yaml:5:"), std::string::npos) << p.log();
}
