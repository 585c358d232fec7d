// balancer/agent_server — HAProxy's agent-check on loch's own agent port (`agent:` in loch.yaml). Per
// connection: one line in (at most 512 bytes, within 2 s), the answer (balancer/agent_answer) out, close —
// HAProxy opens a connection per check. The answer is a snapshot of the broker (Broker::outlook: no I/O, no
// waiting), so it comes within the agent's timeout however busy loch is. Runs on loch's io_context.
#pragma once

#include <cstdint>
#include <memory>

#include <boost/asio/any_io_executor.hpp>
#include <boost/asio/awaitable.hpp>
#include <boost/asio/ip/tcp.hpp>

#include "config/config.hpp"

namespace loch::broker {
class Broker;
}

namespace loch::balancer {

class AgentServer {
  public:
    AgentServer(boost::asio::any_io_executor ex, broker::Broker& broker, config::AgentConfig cfg);
    ~AgentServer();
    // Binds; throws std::runtime_error naming the address when it cannot. The port it got (0 asks for any).
    std::uint16_t listen();
    void start();
    // loch is stopping: every answer is `drain` from now on (running requests finish; nothing new comes).
    void drain() { draining_ = true; }
    void stop();

  private:
    boost::asio::awaitable<void> accept_loop();
    boost::asio::awaitable<void> answer(boost::asio::ip::tcp::socket s);

    boost::asio::any_io_executor ex_;
    broker::Broker& broker_;
    config::AgentConfig cfg_;
    boost::asio::ip::tcp::acceptor acceptor_;
    bool draining_ = false;
    std::shared_ptr<bool> alive_ = std::make_shared<bool>(true);
};

}  // namespace loch::balancer
