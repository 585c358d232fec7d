// http/connection — a client connection's state across its requests: its next read, started early by a
// relay (which also hears the client hang up), and the buffers a relay reads its engine's answer into.
#pragma once

#include <array>
#include <memory>
#include <optional>

#include <boost/asio/any_completion_handler.hpp>
#include <boost/asio/awaitable.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/beast/core/flat_buffer.hpp>

namespace loch::http {

struct RelayState;

// What a relay reads its engine's answer into, kept with the client connection from one request to the next
// (two 16 KiB blocks allocated and freed per request were a tenth of loch's malloc time).
struct RelayBuffers {
    boost::beast::flat_buffer upstream;  // the engine's bytes as read
    std::array<char, 16 * 1024> body;    // a body piece taken from them by the parser
};

// A client connection's state across its requests.
//
// Its next read is started early by a relay: while the relay waits on its engine, the read that will take the
// client's next request is already pending, and it is also how loch hears the client hang up (EOF). A
// readiness wait cancelled after each request cost an epoll_ctl and a posted cancellation, and the session's
// own next read a speculative recv that found nothing, on every request (issue 9). The session's buffer is
// left alone while the read is pending; its bytes are committed when the session takes them.
class Connection {
  public:
    Connection(boost::asio::ip::tcp::socket& socket, boost::beast::flat_buffer& buffer)
        : socket_(&socket), buffer_(&buffer), state_(std::make_shared<State>()) {}
    // Starts the next read now, telling `relay` when the client hangs up while it runs. False (not started)
    // when bytes are already buffered (a pipelined request) or a read is pending.
    bool start_next_read(const std::shared_ptr<RelayState>& relay);
    // The next bytes from the client, committed to the buffer: the read started early, or a new one.
    boost::asio::awaitable<boost::system::error_code> next_read();
    // The relay's buffers (made on the first model request of the connection).
    RelayBuffers& relay_buffers() {
        if (!buffers_) buffers_ = std::make_unique<RelayBuffers>();
        return *buffers_;
    }

  private:
    struct State {
        bool pending = false, completed = false;
        boost::system::error_code ec;
        std::size_t n = 0;
        std::weak_ptr<RelayState> relay;
        // (In an optional: Boost 1.81's any_completion_handler move-assignment wraps the handler in another
        // one instead of moving it.)
        std::optional<boost::asio::any_completion_handler<void(boost::system::error_code)>> waiter;
    };
    boost::asio::ip::tcp::socket* socket_;
    boost::beast::flat_buffer* buffer_;
    std::shared_ptr<State> state_;  // shared with the pending read's handler, which may outlive the session
    std::unique_ptr<RelayBuffers> buffers_;
};

}  // namespace loch::http
