// core/http_pool — the HTTP client's kept connections (core/http_client has the single exchange; both
// connect through core/http_connect): keep-alive connections to the engines, so that a proxied request costs
// no connect and no close (issue 9: a new upstream connection per request was 28–39 syscalls; nginx with its
// keep-alive pool needs 7).
//
// Per engine at most `max_idle_per_engine` idle connections, each dropped after `idle_timeout` (below
// llama-server's own keep-alive timeout of 5 s) or as soon as it is found readable while idle (the engine
// closed it — it stopped, or its keep-alive ran out): by the sweep, and when it is taken after more than
// `look_after` idle. One taken sooner (under load, every one) is not looked at — a syscall per request —
// and one closed in that moment fails before any answer byte and is retried, as below. The key is the
// engine's address plus the secret of that engine run (engines/spec.hpp), so a restarted engine on the same
// port never gets an old run's socket. A relay takes a connection and gives it back only after reading one
// whole response that allows keep-alive; on every other path it closes it. A request that fails on a reused
// connection before any response byte arrived is retried once on a new one (the engine may have closed it as
// it was taken): `Taken::reused` tells the relay when that applies.
//
// One io_context thread, like the server: no locks. The sweep timer runs only while something is idle, so
// an idle loch pays nothing for the pool.
#pragma once

#include <chrono>
#include <cstddef>
#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>

#include <boost/asio/any_io_executor.hpp>
#include <boost/asio/awaitable.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/beast/core/flat_buffer.hpp>
#include <boost/beast/core/tcp_stream.hpp>
#include <boost/beast/http/buffer_body.hpp>
#include <boost/beast/http/parser.hpp>
#include <boost/beast/http/string_body.hpp>

namespace loch::core {

// The pool's key for an engine run: its port and the run's secret (a restarted engine never shares a key).
std::string pool_key(unsigned short port, const std::string& secret);

class HttpPool {
  public:
    struct Options {
        std::size_t max_idle_per_engine = 16;
        std::chrono::milliseconds idle_timeout{4000};
        std::chrono::milliseconds look_after{10};  // idle longer: checked for the engine's close before use
        std::chrono::milliseconds connect_timeout{10000};
    };
    struct Taken {
        boost::system::error_code ec;  // connect failure (only for a new connection)
        std::shared_ptr<boost::beast::tcp_stream> stream;
        bool reused = false;
        bool after_stream = false;  // reused: it was given back after a stream
    };

    explicit HttpPool(boost::asio::any_io_executor ex) : HttpPool(std::move(ex), Options{}) {}
    HttpPool(boost::asio::any_io_executor ex, Options options);
    ~HttpPool();
    HttpPool(const HttpPool&) = delete;
    HttpPool& operator=(const HttpPool&) = delete;

    // One request's first half on a pooled connection: send `request`, read the response head into `parser`
    // (emplaced anew for each attempt, `buffer` cleared). When a *reused* connection fails before any
    // response byte arrived and `may_retry()` still agrees, once more on a new connection. `on_connection`
    // is told each connection before it is used (the relay registers it to close it on a client's hang-up).
    // `stream` is null only when connecting failed; `ec` is the last error (write, read or connect). The
    // head is read without a timer: the caller bounds the engine's silence by cancelling the socket (a
    // stream's watchdog); a cancelled read is never retried.
    struct Exchange {
        boost::system::error_code ec;
        bool connect_failed = false;
        bool retried = false;
        std::shared_ptr<boost::beast::tcp_stream> stream;
    };
    using Request = boost::beast::http::request<boost::beast::http::string_body>;
    using Parser = boost::beast::http::response_parser<boost::beast::http::buffer_body>;
    boost::asio::awaitable<Exchange> exchange(
        const std::string& key, boost::asio::ip::tcp::endpoint endpoint, const Request& request,
        boost::beast::flat_buffer& buffer, std::optional<Parser>& parser,
        const std::function<bool()>& may_retry,
        const std::function<void(std::shared_ptr<boost::beast::tcp_stream>)>& on_connection);

    // An idle connection for `key` (unless `fresh`), or a new one connected to `endpoint`.
    boost::asio::awaitable<Taken> take(const std::string& key, boost::asio::ip::tcp::endpoint endpoint,
                                       bool fresh = false);
    // After one whole response that allows keep-alive. Beyond the per-engine bound the connection is closed.
    // `after_stream`: the response was a stream. Some engines close every connection after a stream although
    // they announce keep-alive (llama-server does); once one such connection was found closed, the pool
    // keeps none after a stream for that engine run.
    void give_back(const std::string& key, std::shared_ptr<boost::beast::tcp_stream> stream,
                   bool after_stream = false);
    // Shutdown: closes every idle connection and keeps none from now on.
    void close();
    // The engine of `key` is about to be stopped: its idle connections are closed first. llama-server's
    // keep-alive threads otherwise hold its exit after SIGTERM by ~110 ms (measured: 0.12 s with one idle
    // connection open, 0.013 s without) — time every swap waits.
    void drop(const std::string& key);

    std::size_t idle_count() const;
    std::size_t connects() const { return connects_; }  // new connections made (tests, bench)
    std::size_t reuses() const { return reuses_; }

  private:
    struct Idle {
        std::shared_ptr<boost::beast::tcp_stream> stream;
        std::chrono::steady_clock::time_point since;
        bool after_stream = false;
    };
    void found_closed(const std::string& key, const Idle& i);
    void arm_sweep();
    void sweep();

    boost::asio::any_io_executor ex_;
    Options options_;
    std::map<std::string, std::deque<Idle>> idle_;
    std::map<std::string, bool> closes_after_streams_;
    boost::asio::steady_timer sweep_timer_;
    bool sweep_armed_ = false;
    bool closed_ = false;
    std::size_t connects_ = 0, reuses_ = 0;
    std::shared_ptr<bool> alive_ = std::make_shared<bool>(true);
};

}  // namespace loch::core
