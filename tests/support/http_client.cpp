#include "support/http_client.hpp"

#include <exception>
#include <thread>

#include <boost/asio/co_spawn.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <boost/asio/write.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>

namespace loch::test {

namespace {

boost::asio::awaitable<HttpResponse> do_request(HttpRequest r) {
    namespace asio = boost::asio;
    namespace beast = boost::beast;
    namespace http = beast::http;
    auto ex = co_await asio::this_coro::executor;
    asio::ip::tcp::resolver resolver(ex);
    beast::tcp_stream stream(ex);
    stream.expires_after(r.timeout);
    const auto endpoints =
        co_await resolver.async_resolve(r.host, std::to_string(r.port), asio::use_awaitable);
    co_await stream.async_connect(endpoints, asio::use_awaitable);

    http::request<http::string_body> req{r.method, r.target, 11};
    req.set(http::field::host, r.host + ":" + std::to_string(r.port));
    req.set(http::field::user_agent, "loch-test");
    if (!r.content_type.empty()) req.set(http::field::content_type, r.content_type);
    for (const auto& [k, v] : r.headers) req.set(k, v);
    if (r.chunk_bytes == 0) {
        req.body() = r.body;
        req.prepare_payload();
        co_await http::async_write(stream, req, asio::use_awaitable);
    } else {
        http::request<http::empty_body> head{r.method, r.target, 11};
        for (const auto& f : req) head.set(f.name_string(), f.value());
        head.chunked(true);
        http::request_serializer<http::empty_body> sr{head};
        co_await http::async_write_header(stream, sr, asio::use_awaitable);
        for (std::size_t at = 0; at < r.body.size(); at += r.chunk_bytes) {
            const auto piece = std::string_view(r.body).substr(at, r.chunk_bytes);
            co_await asio::async_write(stream, http::make_chunk(asio::buffer(piece.data(), piece.size())),
                                       asio::use_awaitable);
        }
        co_await asio::async_write(stream, http::make_chunk_last(), asio::use_awaitable);
    }

    beast::flat_buffer buffer;
    http::response_parser<http::string_body> parser;
    parser.body_limit(std::uint64_t{256} << 20);
    if (r.method == http::verb::head) parser.skip(true);  // its Content-Length is the GET's; no body follows
    co_await http::async_read(stream, buffer, parser, asio::use_awaitable);
    const auto& res = parser.get();

    HttpResponse out;
    out.status = static_cast<int>(res.result_int());
    out.body = res.body();
    for (const auto& f : res) {
        std::string name(f.name_string());
        for (auto& ch : name) ch = static_cast<char>(std::tolower(static_cast<unsigned char>(ch)));
        out.headers[name] = std::string(f.value());
    }
    beast::error_code ec;
    stream.socket().shutdown(asio::ip::tcp::socket::shutdown_both, ec);
    co_return out;
}

}  // namespace

HttpResponse http_request(HttpRequest req) {
    boost::asio::io_context ioc;
    HttpResponse result;
    std::exception_ptr error;
    boost::asio::co_spawn(ioc, do_request(std::move(req)), [&](std::exception_ptr e, HttpResponse r) {
        error = e;
        result = std::move(r);
    });
    ioc.run();
    if (error) std::rethrow_exception(error);
    return result;
}

HttpResponse http_get(std::uint16_t port, const std::string& target, std::chrono::milliseconds timeout) {
    HttpRequest r;
    r.port = port;
    r.target = target;
    r.timeout = timeout;
    return http_request(std::move(r));
}

HttpResponse http_post_json(std::uint16_t port, const std::string& target, const std::string& json,
                            std::chrono::milliseconds timeout) {
    HttpRequest r;
    r.method = boost::beast::http::verb::post;
    r.port = port;
    r.target = target;
    r.body = json;
    r.content_type = "application/json";
    r.timeout = timeout;
    return http_request(std::move(r));
}

bool wait_until_ok(std::uint16_t port, const std::string& target, std::chrono::milliseconds limit) {
    const auto until = std::chrono::steady_clock::now() + limit;
    while (std::chrono::steady_clock::now() < until) {
        try {
            if (http_get(port, target, std::chrono::seconds(1)).status == 200) return true;
        } catch (const std::exception&) {
        }
        std::this_thread::sleep_for(std::chrono::milliseconds(100));
    }
    return false;
}

}  // namespace loch::test
