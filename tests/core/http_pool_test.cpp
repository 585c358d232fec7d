// core/http_pool: keep-alive reuse, the per-engine bound, keys per engine run, idle connections the
// engine closed, and the one retry on a reused connection that fails before any response byte.
// The peer is an in-process HTTP/1.1 server on 127.0.0.1 (Beast) whose behaviour each test sets.
#include <gtest/gtest.h>

#include <boost/asio/as_tuple.hpp>
#include <boost/asio/co_spawn.hpp>
#include <boost/asio/detached.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <boost/beast/http.hpp>

#include "core/http_pool.hpp"

namespace asio = boost::asio;
namespace beast = boost::beast;
namespace bhttp = beast::http;
using asio::ip::tcp;
using loch::core::HttpPool;
using namespace std::chrono_literals;

namespace {

constexpr auto tok = asio::as_tuple(asio::use_awaitable);

// Answers "ok" with keep-alive. `drop_request` (1-based, counted over all connections) is read and then
// the connection closed without an answer, as an engine does whose keep-alive ran out just then.
struct FakeEngine {
    explicit FakeEngine(asio::io_context& ioc) : acceptor(ioc, {asio::ip::make_address("127.0.0.1"), 0}) {
        asio::co_spawn(ioc, accept(), asio::detached);
    }
    asio::awaitable<void> accept() {
        for (;;) {
            auto [ec, s] = co_await acceptor.async_accept(tok);
            if (ec) co_return;
            ++connections;
            asio::co_spawn(acceptor.get_executor(), serve(std::move(s), connections), asio::detached);
        }
    }
    asio::awaitable<void> serve(tcp::socket s, int id) {
        beast::flat_buffer buf;
        for (;;) {
            bhttp::request<bhttp::string_body> req;
            auto [ec, n] = co_await bhttp::async_read(s, buf, req, tok);
            if (ec) {
                ++closed_by_loch;  // the pool closed it (or gave up on it)
                co_return;
            }
            if (++requests == drop_request || id <= dead_up_to) {
                s.close();
                co_return;
            }
            bhttp::response<bhttp::string_body> res{bhttp::status::ok, 11};
            res.body() = "ok";
            res.keep_alive(true);
            res.prepare_payload();
            auto [wec, wn] = co_await bhttp::async_write(s, res, tok);
            if (wec) co_return;
            if (close_after_answer) {
                s.close();
                co_return;
            }
        }
    }
    tcp::endpoint endpoint() const { return acceptor.local_endpoint(); }
    tcp::acceptor acceptor;
    int connections = 0, requests = 0, drop_request = -1, closed_by_loch = 0;
    bool close_after_answer = false;  // an engine whose keep-alive ran out right after an answer
    int dead_up_to = 0;               // connections 1..dead_up_to drop every request unanswered
};

HttpPool::Request request() {
    HttpPool::Request r{bhttp::verb::post, "/v1/completions", 11};
    r.set(bhttp::field::host, "127.0.0.1");
    r.body() = "{}";
    r.prepare_payload();
    return r;
}

// One whole request through the pool; gives the connection back when it was answered completely.
asio::awaitable<int> one(HttpPool& pool, const std::string& key, tcp::endpoint ep, bool* retried = nullptr,
                         bool stream = false) {
    beast::flat_buffer buf;
    std::optional<HttpPool::Parser> parser;
    const auto req = request();
    auto ex = co_await pool.exchange(
        key, ep, req, buf, parser, [] { return true; }, [](auto) {});
    if (retried) *retried = ex.retried;
    if (ex.ec) co_return 0;
    char body[64];
    while (!parser->is_done()) {
        parser->get().body().data = body;
        parser->get().body().size = sizeof body;
        auto [ec, n] = co_await bhttp::async_read_some(*ex.stream, buf, *parser, tok);
        if (ec && ec != bhttp::error::need_buffer) co_return 0;
    }
    if (parser->keep_alive()) pool.give_back(key, ex.stream, stream);
    co_return parser->get().result_int();
}

template <class F>
void run(asio::io_context& ioc, F body) {
    bool done = false;
    asio::co_spawn(
        ioc,
        [&]() -> asio::awaitable<void> {
            co_await body();
            done = true;
            ioc.stop();
        },
        asio::detached);
    ioc.run_for(10s);
    ASSERT_TRUE(done) << "the test coroutine did not finish";
}

}  // namespace

TEST(HttpPool, SequentialRequestsShareOneConnection) {
    asio::io_context ioc;
    FakeEngine engine(ioc);
    HttpPool pool(ioc.get_executor());
    run(ioc, [&]() -> asio::awaitable<void> {
        for (int i = 0; i < 20; ++i) EXPECT_EQ(co_await one(pool, "e#1", engine.endpoint()), 200);
    });
    EXPECT_EQ(engine.connections, 1);
    EXPECT_EQ(pool.connects(), 1u);
    EXPECT_EQ(pool.reuses(), 19u);
    EXPECT_EQ(pool.idle_count(), 1u);
}

TEST(HttpPool, AnotherEngineRunNeverGetsAnOldRunsConnection) {
    asio::io_context ioc;
    FakeEngine engine(ioc);
    HttpPool pool(ioc.get_executor());
    run(ioc, [&]() -> asio::awaitable<void> {
        EXPECT_EQ(co_await one(pool, "port#secret-of-run-1", engine.endpoint()), 200);
        EXPECT_EQ(co_await one(pool, "port#secret-of-run-2", engine.endpoint()), 200);
    });
    EXPECT_EQ(engine.connections, 2);
}

TEST(HttpPool, IdleConnectionsAreBoundedPerEngine) {
    asio::io_context ioc;
    FakeEngine engine(ioc);
    HttpPool::Options o;
    o.max_idle_per_engine = 2;
    HttpPool pool(ioc.get_executor(), o);
    run(ioc, [&]() -> asio::awaitable<void> {
        std::vector<std::shared_ptr<beast::tcp_stream>> held;
        for (int i = 0; i < 4; ++i) held.push_back((co_await pool.take("e", engine.endpoint())).stream);
        for (auto& s : held) pool.give_back("e", s);
    });
    EXPECT_EQ(pool.idle_count(), 2u);
}

TEST(HttpPool, ARequestThatAReusedConnectionDropsIsSentOnceMoreOnANewOne) {
    asio::io_context ioc;
    FakeEngine engine(ioc);
    HttpPool pool(ioc.get_executor());
    run(ioc, [&]() -> asio::awaitable<void> {
        EXPECT_EQ(co_await one(pool, "e", engine.endpoint()), 200);
        engine.drop_request = 2;  // the next request on that connection closes it...
        bool retried = false;
        // ...which the pool cannot know in advance: the request fails before any byte of an answer, on a
        // reused connection, so it is sent once more on a new one.
        EXPECT_EQ(co_await one(pool, "e", engine.endpoint(), &retried), 200);
        EXPECT_TRUE(retried);
    });
    EXPECT_EQ(engine.connections, 2);
    EXPECT_EQ(engine.requests, 3);
}

TEST(HttpPool, WhenTheRetryCannotConnectTheFirstFailureIsWhatIsReported) {
    // An engine that dies mid-request on a reused connection: the retry's connect is refused, and the
    // caller must see the broken request (then it looks up how the engine ended), not "cannot connect".
    asio::io_context ioc;
    auto engine = std::make_unique<FakeEngine>(ioc);
    const auto ep = engine->endpoint();
    HttpPool pool(ioc.get_executor());
    run(ioc, [&]() -> asio::awaitable<void> {
        EXPECT_EQ(co_await one(pool, "e", ep), 200);
        engine->drop_request = 2;
        beast::flat_buffer buf;
        std::optional<HttpPool::Parser> parser;
        const auto req = request();
        auto ex = co_await pool.exchange(
            "e", ep, req, buf, parser,
            [&] {
                engine.reset();  // gone before the retry connects
                return true;
            },
            [](auto) {});
        EXPECT_TRUE(ex.ec);
        EXPECT_FALSE(ex.connect_failed);
        EXPECT_TRUE(ex.retried);
    });
}

TEST(HttpPool, AConnectionTheEngineClosedWhileIdleIsNotTaken) {
    asio::io_context ioc;
    FakeEngine engine(ioc);
    engine.close_after_answer = true;
    HttpPool pool(ioc.get_executor());
    run(ioc, [&]() -> asio::awaitable<void> {
        EXPECT_EQ(co_await one(pool, "e", engine.endpoint()), 200);
        asio::steady_timer t(co_await asio::this_coro::executor);
        t.expires_after(50ms);  // the engine's FIN arrives
        co_await t.async_wait(asio::use_awaitable);
        bool retried = true;
        EXPECT_EQ(co_await one(pool, "e", engine.endpoint(), &retried), 200);
        EXPECT_FALSE(retried) << "a closed idle connection must be noticed before it is used";
    });
    EXPECT_EQ(engine.connections, 2);
    EXPECT_EQ(engine.requests, 2);
}

TEST(HttpPool, AConnectionClosedJustAfterItsAnswerIsRetriedAndTheRequestSucceeds) {
    // Taken again at once (under load): not looked at before use, so the engine's close is found by the
    // failed exchange, which the client never sees — the request goes out once more on a new connection.
    asio::io_context ioc;
    FakeEngine engine(ioc);
    engine.close_after_answer = true;
    HttpPool::Options o;
    o.look_after = 10s;  // always "a moment ago"
    HttpPool pool(ioc.get_executor(), o);
    run(ioc, [&]() -> asio::awaitable<void> {
        EXPECT_EQ(co_await one(pool, "e", engine.endpoint()), 200);
        asio::steady_timer t(co_await asio::this_coro::executor);
        t.expires_after(50ms);  // the engine's FIN arrives
        co_await t.async_wait(asio::use_awaitable);
        bool retried = false;
        EXPECT_EQ(co_await one(pool, "e", engine.endpoint(), &retried), 200);
        EXPECT_TRUE(retried);
    });
    EXPECT_EQ(engine.connections, 2);  // the first, and the retry's: the closed one carried no request
    EXPECT_EQ(engine.requests, 2);
}

TEST(HttpPool, ANewConnectionThatFailsIsNotRetried) {
    asio::io_context ioc;
    FakeEngine engine(ioc);
    engine.drop_request = 1;
    HttpPool pool(ioc.get_executor());
    run(ioc, [&]() -> asio::awaitable<void> {
        bool retried = true;
        EXPECT_EQ(co_await one(pool, "e", engine.endpoint(), &retried), 0);
        EXPECT_FALSE(retried);
    });
    EXPECT_EQ(engine.requests, 1);
}

TEST(HttpPool, IdleConnectionsTimeOutAndTheSweepStops) {
    asio::io_context ioc;
    FakeEngine engine(ioc);
    HttpPool::Options o;
    o.idle_timeout = 100ms;
    HttpPool pool(ioc.get_executor(), o);
    run(ioc, [&]() -> asio::awaitable<void> {
        EXPECT_EQ(co_await one(pool, "e", engine.endpoint()), 200);
        EXPECT_EQ(pool.idle_count(), 1u);
        asio::steady_timer t(co_await asio::this_coro::executor);
        t.expires_after(300ms);
        co_await t.async_wait(asio::use_awaitable);
        EXPECT_EQ(pool.idle_count(), 0u);
    });
}

// An engine about to be stopped loses its idle connections at once (its keep-alive threads would hold its
// exit); another engine's stay.
TEST(HttpPool, DroppingAnEnginesKeyClosesItsIdleConnectionsOnly) {
    asio::io_context ioc;
    FakeEngine stopping(ioc), staying(ioc);
    HttpPool pool(ioc.get_executor());
    run(ioc, [&]() -> asio::awaitable<void> {
        const auto key = loch::core::pool_key(stopping.endpoint().port(), "run-1");
        EXPECT_EQ(co_await one(pool, key, stopping.endpoint()), 200);
        EXPECT_EQ(co_await one(pool, "other#run", staying.endpoint()), 200);
        EXPECT_EQ(pool.idle_count(), 2u);
        pool.drop(key);
        EXPECT_EQ(pool.idle_count(), 1u);
        asio::steady_timer t(co_await asio::this_coro::executor);
        t.expires_after(50ms);
        co_await t.async_wait(asio::use_awaitable);
        EXPECT_EQ(stopping.closed_by_loch, 1) << "the engine saw its connection closed";
        EXPECT_EQ(staying.closed_by_loch, 0);
    });
}

TEST(HttpPool, AfterCloseNothingIsKept) {
    asio::io_context ioc;
    FakeEngine engine(ioc);
    HttpPool pool(ioc.get_executor());
    run(ioc, [&]() -> asio::awaitable<void> {
        EXPECT_EQ(co_await one(pool, "e", engine.endpoint()), 200);
        pool.close();
        EXPECT_EQ(pool.idle_count(), 0u);
        EXPECT_EQ(co_await one(pool, "e", engine.endpoint()), 200);
        EXPECT_EQ(pool.idle_count(), 0u);
    });
}

TEST(HttpPool, TheRetryIsOnANewConnectionNotAnotherIdleOne) {
    asio::io_context ioc;
    FakeEngine engine(ioc);
    HttpPool pool(ioc.get_executor());
    run(ioc, [&]() -> asio::awaitable<void> {
        auto a = (co_await pool.take("e", engine.endpoint())).stream;
        auto b = (co_await pool.take("e", engine.endpoint())).stream;
        pool.give_back("e", a);
        pool.give_back("e", b);
        engine.dead_up_to = 2;  // both idle connections are dead the moment they carry a request
        bool retried = false;
        EXPECT_EQ(co_await one(pool, "e", engine.endpoint(), &retried), 200);
        EXPECT_TRUE(retried);
    });
    EXPECT_EQ(engine.connections, 3);
}

TEST(HttpPool, AnEngineThatClosesAfterStreamsGetsNoConnectionKeptAfterOne) {
    asio::io_context ioc;
    FakeEngine engine(ioc);
    engine.close_after_answer = true;  // as llama-server does after a stream
    HttpPool pool(ioc.get_executor());
    run(ioc, [&]() -> asio::awaitable<void> {
        asio::steady_timer t(co_await asio::this_coro::executor);
        EXPECT_EQ(co_await one(pool, "e", engine.endpoint(), nullptr, true), 200);
        t.expires_after(50ms);
        co_await t.async_wait(asio::use_awaitable);
        EXPECT_EQ(co_await one(pool, "e", engine.endpoint(), nullptr, true), 200);  // finds it closed: learns
        EXPECT_EQ(pool.idle_count(), 0u)
            << "kept a connection after a stream from an engine that closes them";
    });
}
