#include "core/http_pool.hpp"

#include <sys/socket.h>

#include <cerrno>

#include <boost/asio/as_tuple.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <boost/beast/http/read.hpp>
#include <boost/beast/http/write.hpp>

#include "core/http_connect.hpp"
#include "core/io_now.hpp"

namespace loch::core {

namespace asio = boost::asio;
namespace beast = boost::beast;

namespace {

void close_stream(beast::tcp_stream& s) {
    boost::system::error_code ec;
    s.socket().shutdown(asio::ip::tcp::socket::shutdown_both, ec);
    s.socket().close(ec);
}

// An idle keep-alive connection has nothing to read: EOF (the engine closed it), data or an error all mean
// it cannot carry a new request.
bool still_usable(beast::tcp_stream& s) {
    if (!s.socket().is_open()) return false;
    char c;
    const auto n = ::recv(s.socket().native_handle(), &c, 1, MSG_PEEK | MSG_DONTWAIT);
    return n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK);
}

}  // namespace

HttpPool::HttpPool(asio::any_io_executor ex, Options options)
    : ex_(ex), options_(options), sweep_timer_(ex) {}

HttpPool::~HttpPool() {
    *alive_ = false;
    close();
}

asio::awaitable<HttpPool::Taken> HttpPool::take(const std::string& key, asio::ip::tcp::endpoint endpoint,
                                                bool fresh) {
    if (auto it = idle_.find(key); !fresh && it != idle_.end()) {
        auto& q = it->second;
        while (!q.empty()) {
            Idle i = std::move(q.back());  // the most recently used: the least likely to have timed out
            q.pop_back();
            // One idle for a while is looked at first (the engine may have closed it); one given back a
            // moment ago — every request under load — is not: that look is a syscall per request, and a
            // connection closed in that moment fails before any answer byte and is retried once (exchange()).
            const auto idle_for = std::chrono::steady_clock::now() - i.since;
            const bool young = idle_for < options_.idle_timeout;
            if (young &&
                (idle_for < options_.look_after ? i.stream->socket().is_open() : still_usable(*i.stream))) {
                // (An emptied queue stays for the connection's return, which is the next thing under load: a
                // map node and a deque block made and freed per request otherwise. The sweep drops it.)
                ++reuses_;
                co_return Taken{{}, std::move(i.stream), true, i.after_stream};
            }
            if (young) found_closed(key, i);
            close_stream(*i.stream);
        }
        idle_.erase(it);
    }
    Taken t;
    t.stream = std::make_shared<beast::tcp_stream>(ex_);
    t.ec = co_await http_connect(*t.stream, endpoint, options_.connect_timeout);
    ++connects_;
    co_return t;
}

asio::awaitable<HttpPool::Exchange> HttpPool::exchange(
    const std::string& key, asio::ip::tcp::endpoint endpoint, const Request& request,
    beast::flat_buffer& buffer, std::optional<Parser>& parser, const std::function<bool()>& may_retry,
    const std::function<void(std::shared_ptr<beast::tcp_stream>)>& on_connection) {
    Exchange out;
    for (int attempt = 0;; ++attempt) {
        Taken t = co_await take(key, endpoint, /*fresh=*/attempt > 0);
        if (t.ec) {
            out.stream.reset();
            // The retry cannot connect: the engine is gone, and what the caller must explain is the first
            // failure (an engine that died mid-request), not this refusal.
            if (attempt > 0) co_return out;
            out.ec = t.ec;
            out.connect_failed = true;
            co_return out;
        }
        out.stream = t.stream;
        on_connection(t.stream);
        const bool retry_allowed = t.reused && attempt == 0;
        boost::system::error_code ec =
            co_await io_now::write_message(*t.stream, request, std::chrono::seconds(30));
        if (!ec) {
            buffer.clear();
            parser.emplace();
            parser->body_limit(boost::none);
            ec = co_await io_now::read_header(t.stream->socket(), buffer, *parser);
            if (!ec) {
                out.ec = {};
                co_return out;
            }
            if (parser->got_some() || buffer.size() > 0) {  // the engine answered something: no retry
                out.ec = ec;
                co_return out;
            }
        }
        close_stream(*t.stream);
        out.ec = ec;
        if (t.reused && t.after_stream) closes_after_streams_[key] = true;
        // A cancelled read (the relay's watchdog, a client gone, shutdown) is not a stale connection: never
        // sent twice.
        if (!retry_allowed || ec == asio::error::operation_aborted || !may_retry()) co_return out;
        out.retried = true;
    }
}

void HttpPool::found_closed(const std::string& key, const Idle& i) {
    if (i.after_stream) closes_after_streams_[key] = true;
}

void HttpPool::give_back(const std::string& key, std::shared_ptr<beast::tcp_stream> stream,
                         bool after_stream) {
    if (!stream || !stream->socket().is_open()) return;
    stream->expires_never();
    if (closed_ || (after_stream && closes_after_streams_.count(key))) {
        close_stream(*stream);
        return;
    }
    auto& q = idle_[key];
    if (q.size() >= options_.max_idle_per_engine) {
        close_stream(*stream);
        return;
    }
    q.push_back({std::move(stream), std::chrono::steady_clock::now(), after_stream});
    arm_sweep();
}

std::string pool_key(unsigned short port, const std::string& secret) {
    return std::to_string(port) + "#" + secret;
}

void HttpPool::drop(const std::string& key) {
    const auto it = idle_.find(key);
    if (it == idle_.end()) return;
    for (auto& i : it->second) close_stream(*i.stream);
    idle_.erase(it);
    closes_after_streams_.erase(key);
}

void HttpPool::close() {
    closed_ = true;
    for (auto& [key, q] : idle_)
        for (auto& i : q) close_stream(*i.stream);
    idle_.clear();
    closes_after_streams_.clear();
    sweep_timer_.cancel();
}

std::size_t HttpPool::idle_count() const {
    std::size_t n = 0;
    for (const auto& [key, q] : idle_) n += q.size();
    return n;
}

void HttpPool::arm_sweep() {
    if (sweep_armed_) return;
    sweep_armed_ = true;
    sweep_timer_.expires_after(options_.idle_timeout / 4);
    sweep_timer_.async_wait([this, alive = alive_](boost::system::error_code) {
        if (!*alive) return;
        sweep_armed_ = false;
        sweep();
    });
}

// Closes what timed out or what the engine closed; re-arms only while something is still idle.
void HttpPool::sweep() {
    const auto now = std::chrono::steady_clock::now();
    for (auto it = idle_.begin(); it != idle_.end();) {
        auto& q = it->second;
        std::erase_if(q, [&](Idle& i) {
            const bool young = now - i.since < options_.idle_timeout;
            if (young && still_usable(*i.stream)) return false;
            if (young) found_closed(it->first, i);
            close_stream(*i.stream);
            return true;
        });
        it = q.empty() ? idle_.erase(it) : std::next(it);
    }
    if (!idle_.empty()) arm_sweep();
}

}  // namespace loch::core
