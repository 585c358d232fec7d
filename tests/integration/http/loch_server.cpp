// The SSE client of the end-to-end suite (loch_server.hpp), compiled once for every test file of it.
#include "loch_server.hpp"

#include <sys/socket.h>
#include <sys/time.h>

#include <deque>

#include <boost/asio/connect.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>

#include "http/sse.hpp"

namespace loch::itest {

namespace bhttp = boost::beast::http;

struct SseClient::Impl {
    boost::asio::io_context ioc;
    boost::asio::ip::tcp::socket sock{ioc};
    boost::beast::flat_buffer buf;
    bhttp::response_parser<bhttp::buffer_body> parser;
    loch::http::SseFramer framer;
    std::deque<std::string> pending;
    int status = 0;
    std::string content_type;

    void set_timeout(std::chrono::seconds s) {
        timeval tv{static_cast<time_t>(s.count()), 0};
        ::setsockopt(sock.native_handle(), SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
    }
};

SseClient::SseClient(std::uint16_t port, const std::string& target, const std::string& body, bool read_head)
    : impl_(std::make_unique<Impl>()) {
    auto& i = *impl_;
    i.sock.connect({boost::asio::ip::make_address("127.0.0.1"), port});
    i.set_timeout(120s);
    bhttp::request<bhttp::string_body> req{bhttp::verb::post, target, 11};
    req.set(bhttp::field::host, "127.0.0.1");
    req.set(bhttp::field::content_type, "application/json");
    req.body() = body;
    req.prepare_payload();
    bhttp::write(i.sock, req);
    i.parser.body_limit(boost::none);
    if (!read_head) return;
    bhttp::read_header(i.sock, i.buf, i.parser);
    i.status = static_cast<int>(i.parser.get().result_int());
    i.content_type = std::string(i.parser.get()[bhttp::field::content_type]);
}

SseClient::~SseClient() = default;

int SseClient::status() const {
    return impl_->status;
}
const std::string& SseClient::content_type() const {
    return impl_->content_type;
}

std::optional<std::string> SseClient::next_event(std::chrono::seconds timeout) {
    auto& i = *impl_;
    i.set_timeout(timeout);
    while (i.pending.empty()) {
        if (i.parser.is_done()) {
            auto rest = i.framer.take_rest();
            if (rest.empty()) return std::nullopt;
            return rest;
        }
        char tmp[4096];
        i.parser.get().body().data = tmp;
        i.parser.get().body().size = sizeof tmp;
        boost::beast::error_code ec;
        bhttp::read_some(i.sock, i.buf, i.parser, ec);
        if (ec == bhttp::error::need_buffer) ec = {};
        if (ec) throw boost::system::system_error(ec);
        for (auto& e : i.framer.feed(std::string_view(tmp, sizeof tmp - i.parser.get().body().size)))
            i.pending.push_back(std::move(e));
    }
    auto e = std::move(i.pending.front());
    i.pending.pop_front();
    return e;
}

std::string SseClient::rest() {
    std::string all;
    while (auto e = next_event()) all += *e;
    return all;
}

void SseClient::close() {
    boost::system::error_code ec;
    impl_->sock.shutdown(boost::asio::ip::tcp::socket::shutdown_both, ec);
    impl_->sock.close(ec);
}

}  // namespace loch::itest
