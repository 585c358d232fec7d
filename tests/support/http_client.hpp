// support/http_client — a tiny synchronous HTTP/1.1 client for tests (Boost.Beast): one request per
// connection, a deadline on the whole exchange, status + headers + body back. Not for product code.
// Compiled once (http_client.cpp, the loch_test_support library): Beast's templates instantiated in every
// test file that includes this were most of a test file's compile time.
#pragma once

#include <chrono>
#include <cstdint>
#include <map>
#include <optional>
#include <string>

#include <boost/beast/http/verb.hpp>

namespace loch::test {

struct HttpResponse {
    int status = 0;
    std::string body;
    std::map<std::string, std::string> headers;  // lower-case names

    std::optional<std::string> header(const std::string& lower_name) const {
        const auto it = headers.find(lower_name);
        if (it == headers.end()) return std::nullopt;
        return it->second;
    }
};

struct HttpRequest {
    boost::beast::http::verb method = boost::beast::http::verb::get;
    std::string host = "127.0.0.1";
    std::uint16_t port = 0;
    std::string target = "/";
    std::string body;
    std::string content_type;
    std::map<std::string, std::string> headers;
    std::chrono::milliseconds timeout{std::chrono::seconds(60)};
    // > 0: the body goes chunked (Transfer-Encoding, no Content-Length), in chunks of this many bytes, as
    // an endpoint picker sends it.
    std::size_t chunk_bytes = 0;
};

// Throws boost::system::system_error on connection errors and timeouts.
HttpResponse http_request(HttpRequest req);
HttpResponse http_get(std::uint16_t port, const std::string& target,
                      std::chrono::milliseconds timeout = std::chrono::seconds(60));
HttpResponse http_post_json(std::uint16_t port, const std::string& target, const std::string& json,
                            std::chrono::milliseconds timeout = std::chrono::seconds(120));
// Polls GET `target` until it answers 200 (true) or `limit` passes (false): a server just started.
bool wait_until_ok(std::uint16_t port, const std::string& target, std::chrono::milliseconds limit);

}  // namespace loch::test
