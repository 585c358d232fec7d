// Load (issues 9, 26): 256 keep-alive client connections and 1,000 concurrent streams through `loch serve`
// (its default limits) to the real llama-server. Asserted, not timed: every request ends 200 (no 502, no
// 503), the upstream keep-alive pool carries nearly all of them, and loch holds no more descriptors after the
// load than before it.
#include <netinet/in.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <unistd.h>

#include <fmt/format.h>
#include <gtest/gtest.h>
#include <boost/asio/as_tuple.hpp>
#include <boost/asio/co_spawn.hpp>
#include <boost/asio/detached.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <boost/asio/write.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>

#include "fixtures.hpp"
#include "support/proc_facts.hpp"

using namespace loch;
using namespace loch::itest;
using namespace std::chrono_literals;
namespace asio = boost::asio;
namespace beast = boost::beast;
namespace bhttp = beast::http;

namespace {

constexpr auto tok = asio::as_tuple(asio::use_awaitable);

// A chat completion request to loch as a client sends it.
bhttp::request<bhttp::string_body> chat_request(std::string body) {
    bhttp::request<bhttp::string_body> req{bhttp::verb::post, "/v1/chat/completions", 11};
    req.set(bhttp::field::host, "127.0.0.1");
    req.set(bhttp::field::content_type, "application/json");
    req.body() = std::move(body);
    req.prepare_payload();
    return req;
}

// What each client saw, by status or by name, for a failure message.
template <class Key>
std::string dump(const std::map<Key, int>& m) {
    std::string s;
    for (const auto& [k, v] : m) s += fmt::format("{}: {}  ", k, v);
    return s;
}

// One client connection sending `count` requests one after another (keep-alive); each status is counted.
asio::awaitable<void> client(std::uint16_t port, std::string body, int count, std::map<int, int>& statuses) {
    beast::tcp_stream s(co_await asio::this_coro::executor);
    s.expires_after(300s);
    auto [cec] = co_await s.async_connect({asio::ip::make_address("127.0.0.1"), port}, tok);
    if (cec) {
        statuses[-1] += count;
        co_return;
    }
    beast::flat_buffer buf;
    for (int i = 0; i < count; ++i) {
        auto req = chat_request(body);
        s.expires_after(300s);
        auto [wec, wn] = co_await bhttp::async_write(s, req, tok);
        bhttp::response<bhttp::string_body> res;
        auto [rec, rn] = co_await bhttp::async_read(s, buf, res, tok);
        if (wec || rec) {
            statuses[-2] += count - i;
            co_return;
        }
        if (res.result_int() != 200 && !statuses.count(res.result_int()))
            std::fprintf(stderr, "HTTP %d: %s\n", res.result_int(), res.body().substr(0, 2000).c_str());
        ++statuses[res.result_int()];
        if (!res.keep_alive()) co_return;
    }
}

// Runs `n` clients at once on one io_context, each sending `each` requests.
std::map<int, int> run_clients(std::uint16_t port, const std::string& body, int n, int each) {
    asio::io_context ioc;
    std::map<int, int> statuses;
    for (int i = 0; i < n; ++i) asio::co_spawn(ioc, client(port, body, each, statuses), asio::detached);
    ioc.run();
    return statuses;
}

}  // namespace

class Load : public ::testing::Test {
  protected:
    void SetUp() override {
        (void)models();
        // This process opens a thousand client sockets at once.
        rlimit r{};
        ::getrlimit(RLIMIT_NOFILE, &r);
        r.rlim_cur = r.rlim_max;
        ::setrlimit(RLIMIT_NOFILE, &r);
    }
    test::TempDir dir{"loch-itest-load"};
};

TEST_F(Load, ManyConnectionsAndAThousandStreamsAllSucceedAndLeaveNoDescriptors) {
    const std::string args = "    args:\n      ctx: 8192\n      parallel: 8\n      threads: 1\n";
    // loch's own limits (max_connections, queue): a thousand streams at once is what a user's batch script
    // or benchmark does, and the defaults must carry it.
    LochServer loch(dir.path(), config(dir, "1GiB", model_entry("tiny", models().tiny.path(), args)));
    ASSERT_EQ(loch.post("/v1/chat/completions", chat("tiny", false, 1)).status, 200);
    const int pid = loch.process().pid();
    const int fds_before = test::open_fds(pid);
    const auto before = loch.status()["upstream_connections"];

    // 256 keep-alive connections, 4 non-streamed requests each.
    const auto plain = run_clients(loch.port(), chat("tiny", false, 1), 256, 4);
    EXPECT_EQ(plain.size(), 1u) << dump(plain);
    EXPECT_EQ(plain.count(200) ? plain.at(200) : 0, 1024) << dump(plain);
    // The engine saw few connections: the pool carried the requests (8 slots: at most 8 at a time).
    const auto mid = loch.status()["upstream_connections"];
    EXPECT_LE(mid["connects"].get<int>() - before["connects"].get<int>(), 64) << mid.dump();
    EXPECT_GE(mid["reuses"].get<int>() - before["reuses"].get<int>(), 1024 - 64) << mid.dump();
    // 1,000 streams at once. (llama-server closes the connection after every stream, so those cannot be
    // reused; the pool notices the closed socket and connects anew.)
    const auto streams = run_clients(loch.port(), chat("tiny", true, 2), 1000, 1);
    EXPECT_EQ(streams.size(), 1u) << dump(streams);
    EXPECT_EQ(streams.count(200) ? streams.at(200) : 0, 1000) << dump(streams);

    // Nothing outlives the load: client sockets, upstream sockets, timers (idle keep-alive ≤ 5 s).
    int fds_after = test::open_fds(pid);
    for (int i = 0; i < 80 && fds_after > fds_before; ++i) {
        std::this_thread::sleep_for(100ms);
        fds_after = test::open_fds(pid);
    }
    EXPECT_LE(fds_after, fds_before) << "descriptors grew after the load";
    EXPECT_EQ(loch.post("/v1/chat/completions", chat("tiny", false, 1)).status, 200);
}

namespace {

// The faults a crowd of real clients brings, one per client by its index: a stream dropped after its first
// event, a body cut off halfway, bytes that are not HTTP, a stream read to the end. What each one saw is
// counted by name.
asio::awaitable<void> faulty_client(std::uint16_t port, int index, std::map<std::string, int>& seen) {
    beast::tcp_stream s(co_await asio::this_coro::executor);
    s.expires_after(300s);
    auto [cec] = co_await s.async_connect({asio::ip::make_address("127.0.0.1"), port}, tok);
    if (cec) {
        ++seen["connect failed"];
        co_return;
    }
    const int fault = index % 4;
    if (fault == 1) {  // half a body, then gone
        const std::string head =
            "POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
            "Content-Length: 400\r\n\r\n{\"model\":\"tiny\",";
        co_await asio::async_write(s, asio::buffer(head), tok);
        ++seen["cut body"];
        co_return;
    }
    if (fault == 2) {  // not HTTP: an error answer (or a close), never a hang
        const std::string junk = "\x16\x03\x01\x02\x00\x01\x00\x01\xfc\x03\x03 garbage\r\n\r\n";
        co_await asio::async_write(s, asio::buffer(junk), tok);
        beast::flat_buffer buf;
        bhttp::response<bhttp::string_body> res;
        auto [rec, rn] = co_await bhttp::async_read(s, buf, res, tok);
        ++seen[rec ? "junk: closed" : "junk: " + std::to_string(res.result_int())];
        co_return;
    }
    auto req = chat_request(chat("tiny", true, 8));
    auto [wec, wn] = co_await bhttp::async_write(s, req, tok);
    beast::flat_buffer buf;
    bhttp::response_parser<bhttp::string_body> p;
    p.body_limit(boost::none);
    auto [hec, hn] = co_await bhttp::async_read_header(s, buf, p, tok);
    if (wec || hec) {
        ++seen["stream: broken"];
        co_return;
    }
    if (p.get().result_int() != 200) {
        ++seen["stream: HTTP " + std::to_string(p.get().result_int())];
        co_return;
    }
    while (!p.is_done()) {
        auto [ec, n] = co_await bhttp::async_read_some(s, buf, p, tok);
        if (ec) {
            ++seen["stream: broken"];
            co_return;
        }
        if (fault == 3 && p.get().body().find("data:") != std::string::npos) {
            ++seen["stream: dropped"];  // gone after the first event, mid-stream
            co_return;
        }
    }
    const bool whole = p.get().body().find("data: [DONE]") != std::string::npos;
    ++seen[whole ? "stream: whole" : "stream: short"];
}

}  // namespace

// Faults under load: 1,000 clients at once, a quarter each dropping a stream mid-way, cutting a body off,
// sending bytes that are not HTTP, or reading a stream whole. Every whole stream ends with [DONE], none is
// cut or refused, loch frees every slot and descriptor afterwards, and answers the next request.
TEST_F(Load, AThousandClientsWithFaultsLeaveEveryStreamWholeAndNothingBehind) {
    const std::string args = "    args:\n      ctx: 8192\n      parallel: 8\n      threads: 1\n";
    LochServer loch(dir.path(), config(dir, "1GiB", model_entry("tiny", models().tiny.path(), args),
                                       "client_timeouts: {idle: 30s, header: 3s, body: 3s}\n"));
    ASSERT_EQ(loch.post("/v1/chat/completions", chat("tiny", false, 1)).status, 200);
    const int pid = loch.process().pid();
    const int fds_before = test::open_fds(pid);

    std::map<std::string, int> seen;
    {
        asio::io_context ioc;
        for (int i = 0; i < 1000; ++i)
            asio::co_spawn(ioc, faulty_client(loch.port(), i, seen), asio::detached);
        ioc.run();
    }
    EXPECT_EQ(seen["stream: whole"], 250) << dump(seen);
    EXPECT_EQ(seen["stream: dropped"], 250) << dump(seen);
    EXPECT_EQ(seen["cut body"], 250) << dump(seen);
    EXPECT_EQ(seen["junk: 400"] + seen["junk: closed"], 250) << dump(seen);
    EXPECT_EQ(seen.count("stream: short") + seen.count("stream: broken") + seen.count("connect failed"), 0u)
        << dump(seen);

    // Every slot is free again, every descriptor closed (the cut bodies end with the body timeout).
    int fds_after = test::open_fds(pid);
    int active = -1;
    for (int i = 0; i < 100 && (fds_after > fds_before || active != 0); ++i) {
        std::this_thread::sleep_for(100ms);
        fds_after = test::open_fds(pid);
        active = loch.engine_status("tiny")["active_requests"].get<int>();
    }
    EXPECT_LE(fds_after, fds_before) << "descriptors grew after the load";
    EXPECT_EQ(active, 0) << loch.engine_status("tiny").dump();
    EXPECT_EQ(loch.status()["queue"]["interactive"], 0);
    EXPECT_EQ(loch.post("/v1/chat/completions", chat("tiny", false, 1)).status, 200);
}

// A non-streamed answer longer than one read (1,000 tokens with their log-probabilities) is relayed as it
// arrives under the engine's own Content-Length (no whole-body buffering), and arrives whole.
TEST_F(Load, ALongNonStreamedAnswerIsRelayedWhole) {
    LochServer loch(dir.path(), config(dir, "1GiB", model_entry("tiny", models().longctx.path(), kLongArgs)));
    const auto r = loch.post(
        "/v1/completions",
        R"({"model":"tiny","prompt":"Once","max_tokens":1000,"ignore_eos":true,"temperature":0,"logprobs":5})");
    ASSERT_EQ(r.status, 200) << r.body.substr(0, 300);
    EXPECT_GT(r.body.size(), 64u * 1024) << "under proxy.cpp's kRelayFrom: this case does not test relaying";
    ASSERT_TRUE(r.header("content-length"));
    EXPECT_EQ(std::stoul(*r.header("content-length")), r.body.size());
    const auto j = json::parse(r.body);
    EXPECT_EQ(j["usage"]["completion_tokens"], 1000);
}

namespace {

// A blocking client socket to loch that has sent `request` (if any) and read one response to it; closed
// with the object.
struct IdleClient {
    explicit IdleClient(std::uint16_t port, bool with_request) {
        fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
        sockaddr_in a{};
        a.sin_family = AF_INET;
        a.sin_port = htons(port);
        a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
        if (fd < 0 || ::connect(fd, reinterpret_cast<sockaddr*>(&a), sizeof a) != 0) return;
        connected = true;
        if (!with_request) return;
        const std::string req = "GET /health HTTP/1.1\r\nHost: x\r\n\r\n";
        if (::send(fd, req.data(), req.size(), MSG_NOSIGNAL) != static_cast<ssize_t>(req.size())) return;
        timeval tv{10, 0};
        ::setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
        char buf[1024];
        const auto n = ::recv(fd, buf, sizeof buf, 0);
        answered = n > 0 && std::string_view(buf, static_cast<std::size_t>(n)).starts_with("HTTP/1.1 200");
    }
    ~IdleClient() {
        if (fd >= 0) ::close(fd);
    }
    IdleClient(const IdleClient&) = delete;
    IdleClient& operator=(const IdleClient&) = delete;
    int fd = -1;
    bool connected = false, answered = false;
};

}  // namespace

// Issue 26: 2,000 idle connections — half of them keep-alive after a request, half that never sent a byte —
// on loch's default cap of 1,024 must not lock a client with a request out: at the cap loch closes the
// longest-idle connection for each newcomer, and refuses only when every connection is busy.
TEST_F(Load, TwoThousandIdleConnectionsNeverKeepARequestOut) {
    LochServer loch(dir.path(), config(dir, "1GiB", model_entry("tiny", models().tiny.path(), kArgs)));
    ASSERT_EQ(loch.post("/v1/chat/completions", chat("tiny", false, 1)).status, 200);
    std::vector<std::unique_ptr<IdleClient>> idle;
    int answered = 0;
    for (int i = 0; i < 2000; ++i) {
        idle.push_back(std::make_unique<IdleClient>(loch.port(), i % 2 == 0));
        answered += idle.back()->answered;
    }
    EXPECT_EQ(answered, 1000) << "every keep-alive client got its answer, at the cap too";
    // A normal request now: served at once, not 503 until the idle timeout.
    const auto t0 = std::chrono::steady_clock::now();
    const auto r = loch.post("/v1/chat/completions", chat("tiny", false, 1));
    EXPECT_EQ(r.status, 200) << r.body;
    EXPECT_LT(std::chrono::steady_clock::now() - t0, 5s);
    const auto conns = loch.status()["connections"];
    EXPECT_LE(conns["open"].get<int>(), 1024 + 2) << conns.dump();
    EXPECT_GE(conns["idle_closed_at_cap"].get<int>(), 2000 - 1024) << conns.dump();
}
