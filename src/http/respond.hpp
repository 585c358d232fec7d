// http/respond — answers written whole on a client's stream: JSON (with loch's headers: Retry-After, Allow,
// and `x-should-retry: false` where the same request can never get past this box), text, a broker::Error in
// its JSON shape, and the drain before closing a connection whose request was not read to its end.
#pragma once

#include <optional>
#include <string>
#include <string_view>

#include <boost/asio/awaitable.hpp>
#include <boost/beast/core/tcp_stream.hpp>
#include <nlohmann/json.hpp>

#include "broker/error.hpp"

namespace loch::http {

// JSON text for a response (invalid UTF-8 replaced, never thrown on).
std::string dump(const nlohmann::json& j);

// Writes a complete JSON response.
boost::asio::awaitable<void> write_json(boost::beast::tcp_stream& stream, unsigned version, bool keep_alive,
                                        unsigned status, const nlohmann::json& body,
                                        std::optional<int> retry_after_s = std::nullopt,
                                        const std::string& allow = {});
boost::asio::awaitable<void> write_text(boost::beast::tcp_stream& stream, unsigned version, bool keep_alive,
                                        unsigned status, std::string_view content_type, std::string body);
boost::asio::awaitable<void> write_error(boost::beast::tcp_stream& stream, unsigned version, bool keep_alive,
                                         const broker::Error& e, const std::string& allow = {});
// The answer to a HEAD request: the status line and headers of an answer whose body would be `body_bytes`
// long (its Content-Length), and no body.
boost::asio::awaitable<void> write_head(boost::beast::tcp_stream& stream, unsigned version, bool keep_alive,
                                        unsigned status, std::string_view content_type,
                                        std::size_t body_bytes, const std::string& allow = {});

// After an answer to a request whose body was not read to its end (a refusal mid-upload): reads and drops
// what the client still sends, for a moment and up to 64 MiB, before the connection closes. Closing with
// unread data resets the connection, and the client could lose the answer before reading it.
boost::asio::awaitable<void> drain_before_close(boost::beast::tcp_stream& stream);

}  // namespace loch::http
