#include "balancer/agent_server.hpp"

#include <chrono>
#include <string>

#include <spdlog/spdlog.h>
#include <boost/asio/as_tuple.hpp>
#include <boost/asio/co_spawn.hpp>
#include <boost/asio/detached.hpp>
#include <boost/asio/read_until.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/streambuf.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <boost/asio/write.hpp>

#include "balancer/agent_answer.hpp"
#include "broker/broker.hpp"
#include "http/listener.hpp"
#include "http/router.hpp"

namespace loch::balancer {

namespace asio = boost::asio;
using tcp = asio::ip::tcp;
constexpr auto tok = asio::as_tuple(asio::use_awaitable);

AgentServer::AgentServer(asio::any_io_executor ex, broker::Broker& broker, config::AgentConfig cfg)
    : ex_(ex), broker_(broker), cfg_(std::move(cfg)), acceptor_(ex) {}

AgentServer::~AgentServer() {
    *alive_ = false;
}

std::uint16_t AgentServer::listen() {
    return http::listen_on(acceptor_, cfg_.listen, cfg_.port, "HAProxy's agent");
}

void AgentServer::start() {
    asio::co_spawn(ex_, accept_loop(), asio::detached);
}

void AgentServer::stop() {
    boost::system::error_code ec;
    acceptor_.close(ec);
}

asio::awaitable<void> AgentServer::accept_loop() {
    auto alive = alive_;
    asio::steady_timer backoff(ex_);
    while (*alive && acceptor_.is_open()) {
        auto [ec, sock] = co_await acceptor_.async_accept(tok);
        if (!*alive) co_return;
        if (ec) {
            if (ec == asio::error::operation_aborted || !acceptor_.is_open()) co_return;
            // Out of descriptors or the like: the next check comes in a second; do not spin.
            backoff.expires_after(std::chrono::milliseconds(50));
            co_await backoff.async_wait(tok);
            continue;
        }
        asio::co_spawn(ex_, answer(std::move(sock)), asio::detached);
    }
}

asio::awaitable<void> AgentServer::answer(tcp::socket s) {
    auto alive = alive_;
    // A check that sends nothing (or no newline) is closed after 2 s: HAProxy's own timeout is shorter.
    asio::steady_timer deadline(ex_, std::chrono::seconds(2));
    deadline.async_wait([&s](const boost::system::error_code& ec) {
        if (!ec) {
            boost::system::error_code ignored;
            s.close(ignored);
        }
    });
    asio::streambuf in(512);
    auto [ec, n] = co_await asio::async_read_until(s, in, '\n', tok);
    deadline.cancel();
    if (!*alive || !s.is_open()) co_return;
    std::string reply;
    // Closed, timed out or 512 bytes without a newline: not HAProxy (its line always ends with one).
    if (ec) co_return;
    const std::string line(asio::buffers_begin(in.data()),
                           asio::buffers_begin(in.data()) + static_cast<std::ptrdiff_t>(n));
    const auto q = parse_agent_question(line);
    const auto& keys = broker_.view().config().api_keys;
    if (draining_) {
        reply = "drain #loch is stopping\n";
    } else if (!q) {
        reply = "down #loch's agent expects: <model> [resident] [key=<api key>]\n";
    } else if (!keys.empty() && !http::authorized("Bearer " + q->key.value_or(""), keys)) {
        spdlog::warn("agent: a check for '{}' without a valid key= (loch has api_keys)", q->model);
        reply = "down #unauthorized: add key=<one of loch's api_keys> to agent-send\n";
    } else {
        reply = agent_answer(broker_.view().outlook(q->model), q->resident_tier);
    }
    co_await asio::async_write(s, asio::buffer(reply), tok);
    boost::system::error_code ignored;
    s.shutdown(tcp::socket::shutdown_both, ignored);
}

}  // namespace loch::balancer
