// End to end, at the edges: every route followed by a liveness check, a hung engine, SIGTERM with streams
// running, clients that hang up or send slowly, connection floods, HTTP/1.0, the engine's secret and
// environment, what an engine forks. Real `loch serve`, the real llama-server, loch-synth models.
// (Each LochServer also checks at its end that loch is alive, serving, exits 0 and reported no sanitizer
// finding: loch_server.hpp.)
#include <arpa/inet.h>
#include <netinet/in.h>
#include <signal.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cstdlib>
#include <fstream>
#include <future>
#include <thread>

#include <gtest/gtest.h>

#include "fixtures.hpp"
#include "support/proc_facts.hpp"

using namespace loch;
using namespace loch::itest;
using namespace std::chrono_literals;
using nlohmann::json;

namespace {

// A plain TCP connection to loch, for what an HTTP client library will not do (slow, partial, HTTP/1.0).
class RawConnection {
  public:
    explicit RawConnection(std::uint16_t port) : fd_(::socket(AF_INET, SOCK_STREAM, 0)) {
        sockaddr_in a{};
        a.sin_family = AF_INET;
        a.sin_port = htons(port);
        a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
        if (::connect(fd_, reinterpret_cast<sockaddr*>(&a), sizeof a) != 0)
            throw std::runtime_error("connect failed");
    }
    ~RawConnection() { ::close(fd_); }
    RawConnection(const RawConnection&) = delete;
    RawConnection& operator=(const RawConnection&) = delete;

    bool send(std::string_view s) {
        return ::send(fd_, s.data(), s.size(), MSG_NOSIGNAL) == ssize_t(s.size());
    }
    // Everything until the peer closes or `timeout` passes; `closed` says which.
    std::string read_all(std::chrono::milliseconds timeout, bool* closed = nullptr) {
        std::string out;
        const auto deadline = std::chrono::steady_clock::now() + timeout;
        for (;;) {
            const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
                deadline - std::chrono::steady_clock::now());
            if (left.count() <= 0) break;
            timeval tv{static_cast<time_t>(left.count() / 1000),
                       static_cast<suseconds_t>(left.count() % 1000 * 1000)};
            ::setsockopt(fd_, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
            char buf[8192];
            const auto n = ::recv(fd_, buf, sizeof buf, 0);
            if (n == 0) {
                if (closed) *closed = true;
                return out;
            }
            if (n < 0) {
                if (errno == EINTR) continue;
                if (errno == ECONNRESET) {
                    if (closed) *closed = true;
                    return out;
                }
                break;  // timeout
            }
            out.append(buf, static_cast<std::size_t>(n));
        }
        if (closed) *closed = false;
        return out;
    }

  private:
    int fd_;
};

// Every process whose environment has this variable (to find what an engine forked).
std::vector<int> processes_with_env(const std::string& name, const std::string& value) {
    std::vector<int> out;
    for (const auto& e : fs::directory_iterator("/proc")) {
        const auto n = e.path().filename().string();
        if (n.find_first_not_of("0123456789") != std::string::npos) continue;
        const int pid = std::stoi(n);
        if (process_env(pid, name) == value && process_alive(pid)) out.push_back(pid);
    }
    return out;
}

json wait_for_state(LochServer& loch, const std::string& model, const std::string& state,
                    std::chrono::seconds limit) {
    json e = loch.engine_status(model);
    const auto deadline = std::chrono::steady_clock::now() + limit;
    while (e["state"] != state && std::chrono::steady_clock::now() < deadline) {
        std::this_thread::sleep_for(100ms);
        e = loch.engine_status(model);
    }
    return e;
}

}  // namespace

class Robust : public ::testing::Test {
  protected:
    void SetUp() override { (void)models(); }
    test::TempDir dir{"loch-itest-robust"};
};

// Every route, good and bad input, each followed by /health: a crash right after an answer is caught at the
// request that caused it.
TEST_F(Robust, EveryRouteAnswersAndLochStaysAlive) {
    LochServer loch(dir.path(), config(dir, "512MiB", model_entry("tiny", models().tiny.path(), kArgs)));
    struct Case {
        std::string method, target, body;
        int status;
        bool sse = false;  // the answer is an event stream, not JSON
    };
    const std::vector<Case> cases = {
        {"GET", "/health", "", 200},
        {"GET", "/v1/models", "", 200},
        {"GET", "/v1/models/tiny", "", 200},
        {"GET", "/v1/models/nope", "", 404},
        {"GET", "/api/version", "", 200},
        {"GET", "/api/tags", "", 200},
        {"GET", "/api/ps", "", 200},
        {"POST", "/api/pull", R"({"model":"x"})", 400},
        {"POST", "/api/tags", "", 405},
        {"GET", "/loch/status", "", 200},
        {"POST", "/loch/plan", R"({"model":"tiny"})", 200},
        {"POST", "/loch/plan", R"({"model":"nope"})", 404},
        {"POST", "/loch/plan", "not json", 400},
        {"POST", "/loch/plan", R"({"model":5})", 400},
        {"POST", "/api/show", R"({"model":5})", 400},
        {"POST", "/api/show", R"({"model":5,"name":"tiny"})", 200},
        {"POST", "/api/show", R"({"name":"tiny"})", 200},
        {"POST", "/api/show", R"({"name":"tiny:latest"})", 200},  // Ollama's untagged name
        {"POST", "/api/show", R"({"name":"tiny:q8"})", 404},
        // The first model request: it waits for the load, and its odd `loch.progress` is no, not a 500.
        {"POST", "/v1/chat/completions", chat("tiny", true, 2, R"({"loch":{"progress":"yes"}})"), 200, true},
        {"GET", "/loch/engines/tiny/log", "", 200},
        {"GET", "/loch/engines/tiny/log?lines=3", "", 200},
        {"GET", "/loch/engines/nope/log", "", 404},
        {"POST", "/v1/chat/completions", chat("tiny", false, 2), 200},
        {"POST", "/v1/completions", R"({"model":"tiny","prompt":"Hi","max_tokens":2})", 200},
        {"POST", "/v1/embeddings", R"({"model":"tiny","input":5.5})", 400},
        {"POST", "/v1/completions", R"({"model":"tiny","prompt":{"a":1}})", 400},
        {"POST", "/v1/completions", R"({"model":"tiny","prompt":5})", 400},
        {"POST", "/v1/completions", R"({"model":"tiny","prompt":[]})", 400},
        {"POST", "/v1/completions", R"({"model":"tiny","prompt":[-3]})", 400},
        {"POST", "/v1/completions", R"({"model":"tiny","prompt":"Hi","max_tokens":1000000000000})", 400},
        {"POST", "/v1/completions", R"({"model":"tiny","prompt":"Hi","max_tokens":-1})", 400},
        {"POST", "/v1/completions", R"({"model":"tiny","prompt":"Hi","max_tokens":0})", 400},
        {"POST", "/api/generate",
         R"({"model":"tiny:latest","prompt":"Hi","stream":false,"options":{"num_predict":2}})", 200},
        {"POST", "/v1/chat/completions", R"({"model":"tiny","messages":"hi"})", 400},
        {"POST", "/v1/chat/completions", R"([1,2])", 400},
        {"GET", "/loch/engines/tiny/log?lines=abc", "", 200},
        {"GET", "/loch/plan", "", 405},
        {"DELETE", "/v1/models", "", 405},
        {"POST", "/health", "", 405},
        {"GET", "/nothing/here", "", 404},
        {"GET", "/loch/engines//log", "", 404},
        {"GET", "/loch/engines/../log", "", 404},
    };
    for (const auto& c : cases) {
        SCOPED_TRACE(c.method + " " + c.target + " " + c.body);
        test::HttpRequest req;
        req.method = boost::beast::http::string_to_verb(c.method);
        req.port = loch.port();
        req.target = c.target;
        req.body = c.body;
        if (!c.body.empty()) req.content_type = "application/json";
        req.timeout = 120s;
        const auto r = test::http_request(req);
        EXPECT_EQ(r.status, c.status) << r.body;
        if (c.sse) {
            EXPECT_NE(r.body.find("data: [DONE]"), std::string::npos) << r.body;
            EXPECT_EQ(r.body.find("loch.progress"), std::string::npos) << r.body;
        }
        const auto j = c.sse ? json::object() : json::parse(r.body, nullptr, false);
        EXPECT_FALSE(j.is_discarded()) << "not JSON: " << r.body;
        // Ollama's routes answer in Ollama's shape ({"error": "<message>", "type"}), the others in OpenAI's.
        if (r.status >= 400 && c.target.starts_with("/api/"))
            EXPECT_TRUE(j.contains("error") && j["error"].is_string() && j.contains("type")) << r.body;
        else if (r.status >= 400)
            EXPECT_TRUE(j.contains("error") && j["error"].contains("type")) << r.body;
        std::this_thread::sleep_for(100ms);  // the defect crashed loch just after answering
        ASSERT_TRUE(loch.process().running()) << "loch died after " << c.method << " " << c.target << "\n"
                                              << loch.log();
        ASSERT_EQ(loch.get("/health").status, 200);
    }

    // HEAD (Claude Code's first request, uptime checkers): the GET's status and length, no body; 405 where a
    // GET would relay or stream.
    const auto head = [&](const std::string& target) {
        test::HttpRequest req;
        req.method = boost::beast::http::verb::head;
        req.port = loch.port();
        req.target = target;
        return test::http_request(req);
    };
    const auto page = loch.get("/");
    ASSERT_EQ(page.status, 200);
    for (const auto& [target, status] :
         std::vector<std::pair<std::string, int>>{{"/", 200},
                                                  {"/health", 200},
                                                  {"/v1/models", 200},
                                                  {"/api/version", 200},
                                                  {"/nothing/here", 404},
                                                  {"/v1/chat/completions", 405},
                                                  {"/v1/files", 405},
                                                  {"/loch/engines/tiny/log?follow=1", 405}}) {
        SCOPED_TRACE("HEAD " + target);
        const auto r = head(target);
        EXPECT_EQ(r.status, status);
        EXPECT_TRUE(r.body.empty()) << r.body;
        if (status == 405) EXPECT_FALSE(r.headers.at("allow").empty());
    }
    EXPECT_EQ(head("/").headers.at("content-length"), std::to_string(page.body.size()));
    // No body follows a HEAD answer on a kept connection: the next request's answer comes right after it.
    RawConnection c(loch.port());
    ASSERT_TRUE(
        c.send("HEAD / HTTP/1.1\r\nHost: loch\r\n\r\nGET /health HTTP/1.1\r\nHost: loch\r\n"
               "Connection: close\r\n\r\n"));
    const auto both = c.read_all(10s);
    const auto second = both.find("\r\n\r\n");
    ASSERT_NE(second, std::string::npos) << both;
    EXPECT_TRUE(both.substr(second + 4).starts_with("HTTP/1.1 200")) << both;
    ASSERT_TRUE(loch.process().running());
}

TEST_F(Robust, HungEngineIsKilledAndReplaced) {
    LochServer loch(dir.path(), config(dir, "512MiB", long_model("    watchdog: 2s\n")));
    ASSERT_EQ(loch.post("/v1/chat/completions", chat("tiny", false, 2)).status, 200);
    const auto pid = loch.engine_pid("tiny");
    ASSERT_TRUE(pid);
    ::kill(*pid, SIGSTOP);
    const auto e = wait_for_state(loch, "tiny", "stopped", 30s);
    ASSERT_EQ(e["state"], "stopped") << e.dump(2);
    EXPECT_EQ(e["last_exit"]["kind"], "hung") << e.dump(2);
    EXPECT_FALSE(process_alive(*pid)) << "the stopped engine was left behind";
    // The next request is served by a new engine (after the crash backoff).
    const auto r = loch.post("/v1/chat/completions", chat("tiny", false, 2));
    EXPECT_EQ(r.status, 200) << r.body;
    const auto again = loch.engine_pid("tiny");
    ASSERT_TRUE(again);
    EXPECT_NE(*again, *pid);
}

TEST_F(Robust, ANonStreamedRequestOnAnEngineThatHangsEndsWithTheWatchdogAndTheExitReport) {
    LochServer loch(dir.path(), config(dir, "512MiB", long_model("    watchdog: 2s\n")));
    ASSERT_EQ(loch.post("/v1/chat/completions", chat("tiny", false, 2)).status, 200);
    const auto pid = loch.engine_pid("tiny");
    ASSERT_TRUE(pid);
    auto plain = std::async(std::launch::async, [&] {
        return loch.post("/v1/chat/completions", chat("tiny", false, 8000, R"({"ignore_eos":true})"));
    });
    std::this_thread::sleep_for(300ms);  // generating: the answer comes only when done
    ::kill(*pid, SIGSTOP);
    const auto t0 = std::chrono::steady_clock::now();
    ASSERT_EQ(plain.wait_for(30s), std::future_status::ready);
    const auto r = plain.get();
    EXPECT_LT(std::chrono::steady_clock::now() - t0, 20s);  // 2 s watchdog; generous on a loaded machine
    EXPECT_EQ(r.status, 504) << r.body;
    const auto j = nlohmann::json::parse(r.body);
    EXPECT_EQ(j["error"]["type"], "watchdog_timeout") << r.body;
    EXPECT_EQ(j["error"]["exit"]["kind"], "hung") << r.body;
    EXPECT_FALSE(process_alive(*pid));
}

TEST_F(Robust, SigtermEndsRunningStreamsWithAnErrorEventAndNonStreamedWithJson) {
    LochServer loch(dir.path(),
                    config(dir, "512MiB",
                           model_entry("tiny", models().longctx.path(),
                                       "    args:\n      ctx: 32768\n      parallel: 3\n      threads: 1\n"),
                           "stop_grace: 1s\n"));
    ASSERT_EQ(loch.post("/v1/chat/completions", chat("tiny", false, 2)).status, 200);
    std::vector<std::unique_ptr<SseClient>> streams;
    const std::string long_enough = chat("tiny", true, 8000, R"({"ignore_eos":true})");  // fits a 10922 slot
    for (int i = 0; i < 2; ++i) {
        streams.push_back(std::make_unique<SseClient>(loch.port(), "/v1/chat/completions", long_enough));
        ASSERT_EQ(streams.back()->status(), 200) << streams.back()->rest();
        ASSERT_TRUE(streams.back()->next_event());
    }
    auto plain = std::async(std::launch::async, [&] {
        return loch.post("/v1/chat/completions", chat("tiny", false, 8000, R"({"ignore_eos":true})"));
    });
    std::this_thread::sleep_for(500ms);
    loch.expect_exit();
    ::kill(loch.process().pid(), SIGTERM);
    for (auto& s : streams) {
        std::optional<std::string> last;
        while (auto e = s->next_event(30s)) last = e;  // ends cleanly (no throw on a cut connection)
        ASSERT_TRUE(last);
        EXPECT_TRUE(last->starts_with("event: error")) << *last;
        EXPECT_EQ(event_json(*last)["error"]["type"], "shutting_down") << *last;
    }
    const auto r = plain.get();
    EXPECT_EQ(r.status, 503) << r.body;
    EXPECT_EQ(json::parse(r.body)["error"]["type"], "shutting_down");
    const auto status = loch.process().wait_for(30s);
    ASSERT_TRUE(status) << "loch did not exit after SIGTERM";
    EXPECT_EQ(*status, 0) << loch.log();
}

TEST_F(Robust, NonStreamedClientHangingUpCancelsTheEngine) {
    LochServer loch(dir.path(), config(dir, "512MiB", long_model()));
    ASSERT_EQ(loch.post("/v1/chat/completions", chat("tiny", false, 2)).status, 200);
    const auto e = loch.engine_status("tiny");
    const int engine_pid = e["engine"]["pid"].get<int>();
    const auto engine_port = e["engine"]["port"].get<std::uint16_t>();
    {
        RawConnection c(loch.port());
        const std::string body = chat("tiny", false, 30000, R"({"ignore_eos":true})");
        ASSERT_TRUE(
            c.send("POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
                   "Content-Length: " +
                   std::to_string(body.size()) + "\r\n\r\n" + body));
        // Until the engine is generating for it.
        bool busy = false;
        for (int i = 0; i < 100 && !busy; ++i) {
            auto slots = json::parse(engine_get(engine_pid, engine_port, "/slots").body, nullptr, false);
            busy = slots.is_array() && !slots.empty() && slots[0]["is_processing"] == true;
            if (!busy) std::this_thread::sleep_for(50ms);
        }
        ASSERT_TRUE(busy);
    }  // the client hangs up
    // Polled slowly: this llama-server checks a non-streamed request's connection only when its result wait
    // times out (1 s), and every /slots answer restarts that wait.
    bool idle = false;
    for (int i = 0; i < 8 && !idle; ++i) {
        std::this_thread::sleep_for(1500ms);
        auto slots = json::parse(engine_get(engine_pid, engine_port, "/slots").body, nullptr, false);
        idle = slots.is_array() && !slots.empty() && slots[0]["is_processing"] == false;
    }
    EXPECT_TRUE(idle) << "the engine kept generating for a client that was gone: "
                      << engine_get(engine_pid, engine_port, "/slots").body.substr(0, 300) << "\n"
                      << loch.log();
    for (int i = 0; i < 50 && loch.engine_status("tiny")["active_requests"] != 0; ++i)
        std::this_thread::sleep_for(100ms);
    EXPECT_EQ(loch.engine_status("tiny")["active_requests"], 0);
}

TEST_F(Robust, SlowClientsAreTimedOutAndIdleConnectionsClosed) {
    LochServer loch(dir.path(), config(dir, "512MiB", model_entry("tiny", models().tiny.path(), kArgs),
                                       "client_timeouts: {idle: 2s, header: 2s, body: 2s}\n"));
    const auto t0 = std::chrono::steady_clock::now();
    RawConnection slowloris(loch.port());
    RawConnection slow_body(loch.port());
    RawConnection idle(loch.port());
    ASSERT_TRUE(slow_body.send("POST /v1/completions HTTP/1.1\r\nHost: x\r\nContent-Length: 100\r\n\r\n{"));
    // One header line a second: the header deadline ends it, not the per-read idle time.
    std::string got;
    bool closed = false;
    ASSERT_TRUE(slowloris.send("GET /health HTTP/1.1\r\n"));
    for (int i = 0; i < 8 && !closed; ++i) {
        slowloris.send("X-Slow-" + std::to_string(i) + ": 1\r\n");
        got += slowloris.read_all(1s, &closed);
    }
    EXPECT_TRUE(closed) << "a slowloris header was still open after 8 s";
    EXPECT_NE(got.find(" 408 "), std::string::npos) << got;
    got = slow_body.read_all(10s, &closed);
    EXPECT_TRUE(closed);
    EXPECT_NE(got.find(" 408 "), std::string::npos) << got;
    EXPECT_NE(got.find("request_timeout"), std::string::npos) << got;
    idle.read_all(10s, &closed);
    EXPECT_TRUE(closed) << "an idle connection was kept past client_timeouts.idle";
    EXPECT_LT(std::chrono::steady_clock::now() - t0, 20s);
}

TEST_F(Robust, ConnectionFloodIsRefusedClearlyAndLeavesNoDescriptors) {
    LochServer loch(dir.path(), config(dir, "512MiB", model_entry("tiny", models().tiny.path(), kArgs),
                                       "max_connections: 8\nclient_timeouts: {idle: 5s}\n"));
    ASSERT_EQ(loch.post("/v1/chat/completions", chat("tiny", false, 2)).status, 200);
    const int pid = loch.process().pid();
    const int fds_before = test::open_fds(pid);
    {
        // Eight connections each in the middle of a request (an idle one would be closed to make room).
        std::vector<std::unique_ptr<RawConnection>> held;
        for (int i = 0; i < 8; ++i) {
            held.push_back(std::make_unique<RawConnection>(loch.port()));
            held.back()->send("GET /health HTTP/1.1\r\n");
        }
        std::this_thread::sleep_for(300ms);
        RawConnection extra(loch.port());
        bool closed = false;
        const auto got = extra.read_all(5s, &closed);
        EXPECT_TRUE(closed);
        EXPECT_NE(got.find(" 503 "), std::string::npos) << got;
        EXPECT_NE(got.find("too_many_connections"), std::string::npos) << got;
    }
    // A burst of real requests on many connections: all answered, then the descriptors come back.
    std::vector<std::future<int>> burst;
    for (int i = 0; i < 32; ++i)
        burst.push_back(std::async(std::launch::async, [&] {
            for (int attempt = 0; attempt < 100; ++attempt) {
                const auto r = loch.post("/v1/chat/completions", chat("tiny", false, 1));
                if (r.status != 503) return r.status;
                std::this_thread::sleep_for(100ms);  // over the cap: told to retry
            }
            return 503;
        }));
    for (auto& f : burst) EXPECT_EQ(f.get(), 200);
    int fds_after = test::open_fds(pid);
    // Idle keep-alive connections to the engine are closed within 5 s (core/http_pool.hpp).
    for (int i = 0; i < 80 && fds_after > fds_before; ++i) {
        std::this_thread::sleep_for(100ms);
        fds_after = test::open_fds(pid);
    }
    EXPECT_LE(fds_after, fds_before) << "descriptors grew after the load";
}

TEST_F(Robust, Http10ClientGetsAStreamWithoutChunkedEncoding) {
    LochServer loch(dir.path(), config(dir, "512MiB", model_entry("tiny", models().tiny.path(), kArgs)));
    RawConnection c(loch.port());
    const std::string body = chat("tiny", true, 8);
    ASSERT_TRUE(
        c.send("POST /v1/chat/completions HTTP/1.0\r\nContent-Type: application/json\r\nContent-Length: " +
               std::to_string(body.size()) + "\r\n\r\n" + body));
    bool closed = false;
    const auto got = c.read_all(120s, &closed);
    EXPECT_TRUE(closed) << "an HTTP/1.0 stream must end with the connection";
    EXPECT_TRUE(got.starts_with("HTTP/1.0 200")) << got.substr(0, 200);
    EXPECT_EQ(got.find("Transfer-Encoding"), std::string::npos) << got.substr(0, 400);
    EXPECT_NE(got.find("data: [DONE]"), std::string::npos) << got;
}

TEST_F(Robust, EnginePortRefusesRequestsWithoutLochsSecretAndGetsNoSecretsOfLochs) {
    ::setenv("LOCH_ITEST_SECRET", "do-not-leak", 1);
    LochServer loch(dir.path(), config(dir, "512MiB", model_entry("tiny", models().tiny.path(), kArgs)));
    ::unsetenv("LOCH_ITEST_SECRET");
    ASSERT_EQ(loch.post("/v1/chat/completions", chat("tiny", false, 2)).status, 200);
    const auto e = loch.engine_status("tiny");
    const int engine_pid = e["engine"]["pid"].get<int>();
    const auto engine_port = e["engine"]["port"].get<std::uint16_t>();
    const auto direct =
        test::http_post_json(engine_port, "/v1/completions", R"({"prompt":"Hi","max_tokens":2})", 30s);
    EXPECT_EQ(direct.status, 401) << direct.body;
    EXPECT_EQ(engine_get(engine_pid, engine_port, "/props").status, 200);  // with the secret
    EXPECT_FALSE(process_env(engine_pid, "LOCH_ITEST_SECRET")) << "loch's environment leaked to the engine";
    EXPECT_TRUE(process_env(engine_pid, "PATH"));
    // The secret is not shown in loch's status.
    const auto key = process_env(engine_pid, "LLAMA_API_KEY");
    ASSERT_TRUE(key);
    EXPECT_EQ(loch.get("/loch/status").body.find(*key), std::string::npos);
}

TEST_F(Robust, ListenOnAnOpenAddressWithoutApiKeysIsRefused) {
    const auto cfg = dir.path() / "open.yaml";
    std::ofstream(cfg) << config(dir, "512MiB", model_entry("tiny", models().tiny.path(), kArgs));
    test::Process p(bin() / "loch", {"serve", "--config", cfg.string(), "--listen", "0.0.0.0", "--port", "0"},
                    dir.path() / "open.log");
    const auto st = p.wait_for(20s);
    ASSERT_TRUE(st) << "loch started listening on 0.0.0.0 without api_keys";
    EXPECT_NE(*st, 0);
    EXPECT_NE(p.log().find("api_keys"), std::string::npos) << p.log();
    test::Process q(bin() / "loch", {"serve", "--config", cfg.string(), "--port", "70000"},
                    dir.path() / "port.log");
    const auto qs = q.wait_for(20s);
    ASSERT_TRUE(qs) << "--port 70000 was accepted";
    EXPECT_NE(*qs, 0);
}

TEST_F(Robust, TheCommandLineNamesWhatIsWrongAndItsFoldersOverrideTheConfig) {
    // An unknown command is named, with the ones that exist.
    test::Process unknown(bin() / "loch", {"srve"}, dir.path() / "unknown.log");
    const auto us = unknown.wait_for(10s);
    ASSERT_TRUE(us);
    EXPECT_EQ(*us, 2);
    EXPECT_NE(unknown.log().find("unknown command 'srve'"), std::string::npos) << unknown.log();
    EXPECT_NE(unknown.log().find("serve"), std::string::npos);
    // The flag the embedded default's error tells the user to pass exists.
    test::Process nodir(bin() / "loch", {"serve", "--models-dir", (dir.path() / "missing").string()},
                        dir.path() / "nodir.log");
    const auto ns = nodir.wait_for(10s);
    ASSERT_TRUE(ns);
    EXPECT_NE(*ns, 0);
    EXPECT_NE(nodir.log().find("does not exist"), std::string::npos) << nodir.log();
    EXPECT_NE(nodir.log().find("--models-dir"), std::string::npos) << nodir.log();
    // --state-dir and --log-dir win over the config's.
    const auto state = dir.path() / "other-state", logs = dir.path() / "other-logs";
    {
        LochServer loch(dir.path(), config(dir, "512MiB", model_entry("tiny", models().tiny.path(), kArgs)),
                        {"--state-dir", state.string(), "--log-dir", logs.string()});
        ASSERT_EQ(loch.post("/v1/chat/completions", chat("tiny", false, 2)).status, 200);
        EXPECT_TRUE(fs::exists(logs / "tiny.log"));
        EXPECT_TRUE(fs::exists(state / "loch.lock"));
    }
}

// An engine that forks a child into its own session: after SIGKILL of loch the child survives (the leader
// dies of PDEATHSIG, the child does not); the next loch kills it, found by the engine's tag.
TEST_F(Robust, WhatAnEngineForkedIsGoneAfterLochIsKilledAndRestarted) {
    const std::string entry =
        "  - name: forker\n    engine: command\n    command:\n      argv: [/bin/sh, -c, "
        "\"setsid sleep 600 & exec " +
        (bin() / "llama-server").string() +
        " -m {model_path} --host {host} --port {port} -c 512 -t 1 --device none\"]\n"
        "    path: " +
        models().tiny.path().string() + "\n";
    const std::string cfg = config(dir, "512MiB", entry);
    std::string tag;
    std::vector<int> forked;
    {
        LochServer loch(dir.path(), cfg);
        ASSERT_EQ(loch.post("/v1/completions", R"({"model":"forker","prompt":"Hi","max_tokens":2})").status,
                  200);
        const auto pid = loch.engine_pid("forker");
        ASSERT_TRUE(pid);
        tag = process_env(*pid, "LOCH_ENGINE_TAG").value_or("");
        ASSERT_FALSE(tag.empty());
        forked = processes_with_env("LOCH_ENGINE_TAG", tag);
        ASSERT_GE(forked.size(), 2u);  // the engine and its sleep
        loch.expect_exit();
        ::kill(loch.process().pid(), SIGKILL);
        loch.process().wait_for(5s);
    }
    std::this_thread::sleep_for(500ms);
    EXPECT_FALSE(processes_with_env("LOCH_ENGINE_TAG", tag).empty())
        << "control: the forked child should survive";
    LochServer again(dir.path(), cfg);
    for (int i = 0; i < 50 && !processes_with_env("LOCH_ENGINE_TAG", tag).empty(); ++i)
        std::this_thread::sleep_for(100ms);
    EXPECT_TRUE(processes_with_env("LOCH_ENGINE_TAG", tag).empty())
        << "a process forked by the stale engine survived";
    EXPECT_NE(again.log().find("forked by a stale engine"), std::string::npos) << again.log();
}

// The dry run is accounted for (issue 8, defect 8): while it runs it holds the device like a load (shown in
// /loch/status as a loading device, and no load starts beside it there), and its result is cached across a
// restart of loch. Test double: the real llama-fit-params behind a script that waits a second and counts
// its runs.
TEST_F(Robust, DryRunHoldsTheDeviceAndIsCachedAcrossRestarts) {
    const fs::path engines = dir.path() / "engines";
    fs::create_directories(engines);
    fs::create_symlink(bin() / "llama-server", engines / "llama-server");
    const fs::path runs = dir.path() / "dry-runs";
    {
        std::ofstream s(engines / "llama-fit-params");
        s << "#!/bin/sh\n# test double: the real llama-fit-params, a second late, counting its runs\necho "
             "run >> "
          << runs.string() << "\nsleep 1\nexec " << (bin() / "llama-fit-params").string() << " \"$@\"\n";
    }
    fs::permissions(engines / "llama-fit-params", fs::perms::owner_all);
    std::string cfg =
        config(dir, "1GiB", model_entry("a", models().tiny.path()) + model_entry("b", models().tiny2.path()));
    const std::string from = "engine_dir: " + bin().string();
    cfg.replace(cfg.find(from), from.size(), "engine_dir: " + engines.string());
    auto count_runs = [&] {
        std::ifstream in(runs);
        int n = 0;
        for (std::string l; std::getline(in, l);) ++n;
        return n;
    };
    {
        LochServer loch(dir.path(), cfg);
        auto first = std::async(std::launch::async, [&] {
            return loch.post("/v1/completions", R"({"model":"a","prompt":"Hi","max_tokens":2})").status;
        });
        // While a's dry run runs (a second), the CPU is a loading device and a is not loading yet.
        bool held = false;
        for (int i = 0; i < 40 && !held; ++i) {
            const json s = loch.status();
            const json a = loch.engine_status("a");
            for (const auto& d : s["loading_devices"]) held |= d == "cpu" && a["state"] == "stopped";
            std::this_thread::sleep_for(25ms);
        }
        EXPECT_TRUE(held) << "the dry run did not hold the device";
        // A second model asked for meanwhile waits for the device instead of loading beside the dry run.
        auto second = std::async(std::launch::async, [&] {
            return loch.post("/v1/completions", R"({"model":"b","prompt":"Hi","max_tokens":2})").status;
        });
        EXPECT_EQ(first.get(), 200);
        EXPECT_EQ(second.get(), 200);
        EXPECT_EQ(count_runs(), 2);
    }
    LochServer again(dir.path(), cfg);
    EXPECT_EQ(again.post("/v1/completions", R"({"model":"a","prompt":"Hi","max_tokens":2})").status, 200);
    EXPECT_EQ(count_runs(), 2) << "the dry run ran again after a restart instead of coming from its cache";
}

// Fault injection (issue 8, "OOM at load is learned from"): an engine that dies of out-of-memory while
// loading has its figure raised by the allocation that failed; loch tries once more if that still fits
// and otherwise refuses with the numbers — never the same failure twice in a row. Test double: a command
// engine that prints a CUDA out-of-memory line and exits, counting its starts.
TEST_F(Robust, OutOfMemoryAtLoadRaisesTheFigureThenRetriesOnceOrRefuses) {
    auto oom_engine = [&](const std::string& name, const std::string& mib) {
        const fs::path runs = dir.path() / (name + ".runs");
        return "  - name: " + name +
               "\n    engine: command\n    command:\n      argv: [/bin/sh, -c, \"echo run >> " +
               runs.string() + "; echo 'ggml_backend_cuda_buffer_type_alloc_buffer: allocating " + mib +
               ".00 MiB on device 0: cudaMalloc failed: out of memory' >&2; exit 1\"]\n    path: " +
               models().tiny.path().string() + "\n";
    };
    auto runs_of = [&](const std::string& name) {
        std::ifstream in(dir.path() / (name + ".runs"));
        int n = 0;
        for (std::string l; std::getline(in, l);) ++n;
        return n;
    };
    LochServer loch(dir.path(), config(dir, "1GiB", oom_engine("small", "64") + oom_engine("huge", "4096")));
    // 64 MiB more still fits the 1 GiB budget: one retry with the raised figure, then the engine's error.
    auto r = loch.post("/v1/completions", R"({"model":"small","prompt":"Hi","max_tokens":2})");
    EXPECT_EQ(r.status, 502) << r.body;
    EXPECT_EQ(runs_of("small"), 2);
    json e = json::parse(r.body)["error"];
    EXPECT_EQ(e["type"], "engine_failed");
    EXPECT_GT(e["raised_to_bytes"].get<std::uint64_t>(), e["reserved_bytes"].get<std::uint64_t>());
    EXPECT_NE(e["message"].get<std::string>().find("out of memory"), std::string::npos) << e.dump();
    // 4 GiB more can never fit 1 GiB: after one start, refused at once with the numbers.
    r = loch.post("/v1/completions", R"({"model":"huge","prompt":"Hi","max_tokens":2})");
    EXPECT_EQ(r.status, 503) << r.body;
    EXPECT_EQ(json::parse(r.body)["error"]["type"], "insufficient_memory");
    EXPECT_EQ(runs_of("huge"), 1);
    // And it stays refused without another start: the learned figure is kept.
    r = loch.post("/v1/completions", R"({"model":"huge","prompt":"Hi","max_tokens":2})");
    EXPECT_EQ(r.status, 503) << r.body;
    EXPECT_EQ(runs_of("huge"), 1);
}

// Descriptors are reserved for the engines (issue 9): under a hard open-file limit of 300, loch serves at
// most (300 − 256) / 2 = 22 client connections, says so at start, refuses the 23rd clearly and still reaches
// its engine — a flood of clients cannot starve the engine connections.
TEST_F(Robust, ALowFileLimitLowersTheConnectionCapInsteadOfStarvingEngines) {
    const auto cfg = dir.path() / "fd.yaml";
    std::ofstream(cfg) << config(dir, "512MiB", model_entry("tiny", models().tiny.path(), kArgs),
                                 "max_connections: 512\n");
    const auto port = test::free_port();
    test::Process p("/usr/bin/prlimit",
                    {"--nofile=300:300", (bin() / "loch").string(), "serve", "--config", cfg.string(),
                     "--port", std::to_string(port)},
                    dir.path() / "fd.log");
    bool up = false;
    for (int i = 0; i < 200 && !up && p.running(); ++i) {
        try {
            up = test::http_get(port, "/health", 1s).status == 200;
        } catch (const std::exception&) {
            std::this_thread::sleep_for(50ms);
        }
    }
    ASSERT_TRUE(up) << p.log();
    EXPECT_NE(p.log().find("serving at most 22 connections"), std::string::npos) << p.log();
    {
        std::vector<std::unique_ptr<RawConnection>> held;
        for (int i = 0; i < 22; ++i) {
            held.push_back(std::make_unique<RawConnection>(port));
            held.back()->send("GET /health HTTP/1.1\r\n");  // busy: in the middle of its header
        }
        std::this_thread::sleep_for(300ms);
        RawConnection extra(port);
        bool closed = false;
        const auto got = extra.read_all(5s, &closed);
        EXPECT_NE(got.find("too_many_connections"), std::string::npos) << got;
    }
    // The held connections are gone: a real request reaches the engine.
    std::this_thread::sleep_for(300ms);
    test::HttpRequest r;
    r.method = boost::beast::http::verb::post;
    r.port = port;
    r.target = "/v1/chat/completions";
    r.body = chat("tiny", false, 2);
    r.content_type = "application/json";
    EXPECT_EQ(test::http_request(r).status, 200);
    // Alive and clean to the end, as LochServer checks for the other cases (prlimit execs loch: same pid).
    EXPECT_EQ(test::http_get(port, "/health", 5s).status, 200);
    EXPECT_EQ(p.stop(std::chrono::seconds(10)).value_or(-1), 0) << p.log();
    for (const char* marker : {"AddressSanitizer", "LeakSanitizer", "runtime error:"})
        EXPECT_EQ(p.log().find(marker), std::string::npos) << p.log();
}
