// http/server — loch's HTTP front: one acceptor and one coroutine per connection on the io_context (no
// thread per connection). Routes (http/router.hpp) to the admin handlers and the OpenAI proxy; every error,
// wherever it is thrown, leaves through http/errors.hpp.
//
// The proxy (http/proxy.cpp) relays the engine's response as it arrives: a streamed (SSE) response is
// forwarded event by event, never buffered whole. Before anything is sent to the engine the request is
// checked against the slot context. An engine that dies mid-request gives a 502 JSON if nothing was sent yet,
// otherwise an SSE `error` event and a clean end of the stream. A client that disconnects closes the
// upstream connection (the engine cancels its task). A watchdog aborts a request whose engine went silent.
#pragma once

#include <chrono>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include <boost/asio/any_io_executor.hpp>
#include <boost/asio/awaitable.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/beast/core/flat_buffer.hpp>
#include <boost/beast/core/tcp_stream.hpp>
#include <boost/beast/http/message.hpp>
#include <boost/beast/http/string_body.hpp>

#include "broker/broker.hpp"
#include "http/openai_request.hpp"

namespace loch::http {

struct ServerOptions {
    std::string listen = "127.0.0.1";
    std::uint16_t port = 8080;  // 0 = any free port (tests)
    std::vector<std::string> api_keys;
    std::uint64_t max_body_bytes = 16 * 1024 * 1024;
    std::chrono::seconds idle_timeout{120};      // keep-alive connection without a request
    std::chrono::seconds default_watchdog{600};  // models without a watchdog: still never wait forever
};

class Server {
  public:
    Server(boost::asio::any_io_executor ex, broker::Broker& broker, ServerOptions options);
    ~Server();

    // Binds and listens; throws std::runtime_error naming the address. Returns the bound port.
    std::uint16_t listen();
    void start();  // accept loop
    void stop();   // stop accepting; open connections finish their request
    std::uint16_t port() const { return port_; }

    using Request = boost::beast::http::request<boost::beast::http::string_body>;

  private:
    boost::asio::awaitable<void> accept_loop();
    boost::asio::awaitable<void> session(boost::asio::ip::tcp::socket socket);
    boost::asio::awaitable<bool> handle(boost::beast::tcp_stream& stream, Request& req);
    boost::asio::awaitable<bool> proxy(boost::beast::tcp_stream& stream, Request& req, Endpoint endpoint);
    boost::asio::awaitable<void> check_context(const broker::Lease& lease, const OpenAIRequest& r);

    boost::asio::any_io_executor ex_;
    broker::Broker& broker_;
    ServerOptions options_;
    boost::asio::ip::tcp::acceptor acceptor_;
    std::uint16_t port_ = 0;
    std::shared_ptr<bool> alive_;
};

// Writes a complete JSON response.
boost::asio::awaitable<void> write_json(boost::beast::tcp_stream& stream, unsigned version, bool keep_alive,
                                        unsigned status, const nlohmann::json& body,
                                        std::optional<int> retry_after_s = std::nullopt,
                                        const std::string& allow = {});
boost::asio::awaitable<void> write_error(boost::beast::tcp_stream& stream, unsigned version, bool keep_alive,
                                         const broker::Error& e, const std::string& allow = {});

}  // namespace loch::http
