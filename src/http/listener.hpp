// http/listener — opens an acceptor on an address and port (the API's, the agent's), with the error a
// person can act on ("cannot listen for <what> on <address>:<port>: Address already in use").
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

#include <boost/asio/ip/tcp.hpp>

namespace loch::http {

// Binds and listens; the port it got (0 asks for any). Throws std::runtime_error naming what and where.
std::uint16_t listen_on(boost::asio::ip::tcp::acceptor& acceptor, const std::string& address,
                        std::uint16_t port, std::string_view what);

}  // namespace loch::http
