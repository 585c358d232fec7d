#include "http/listener.hpp"

#include <stdexcept>

namespace loch::http {

std::uint16_t listen_on(boost::asio::ip::tcp::acceptor& acceptor, const std::string& address,
                        std::uint16_t port, std::string_view what) {
    namespace asio = boost::asio;
    boost::system::error_code ec;
    const auto addr = asio::ip::make_address(address, ec);
    if (ec) throw std::runtime_error(std::string(what) + " address '" + address + "' is not an IP address");
    const asio::ip::tcp::endpoint ep(addr, port);
    acceptor.open(ep.protocol());
    acceptor.set_option(asio::socket_base::reuse_address(true));
    acceptor.bind(ep, ec);
    if (ec)
        throw std::runtime_error("cannot listen for " + std::string(what) + " on " + address + ":" +
                                 std::to_string(port) + ": " + ec.message());
    acceptor.listen(asio::socket_base::max_listen_connections);
    return acceptor.local_endpoint().port();
}

}  // namespace loch::http
