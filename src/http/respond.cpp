// Answers written whole (respond.hpp).
#include "http/respond.hpp"

#include <boost/asio/as_tuple.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <boost/beast/http.hpp>

#include "core/io_now.hpp"
#include "core/json_text.hpp"
#include "http/errors.hpp"

namespace loch::http {

namespace asio = boost::asio;
namespace beast = boost::beast;
namespace bhttp = beast::http;

std::string dump(const nlohmann::json& j) {
    return core::json_text(j);
}

asio::awaitable<void> write_json(beast::tcp_stream& stream, unsigned version, bool keep_alive,
                                 unsigned status, const nlohmann::json& body,
                                 std::optional<int> retry_after_s, const std::string& allow) {
    bhttp::response<bhttp::string_body> res{static_cast<bhttp::status>(status), version};
    res.set(bhttp::field::server, "loch");
    res.set(bhttp::field::content_type, "application/json");
    if (retry_after_s) res.set(bhttp::field::retry_after, std::to_string(*retry_after_s));
    if (!allow.empty()) res.set(bhttp::field::allow, allow);
    // A refusal that the same request can never get past here (bad input, no such model, too large for
    // this box's hardware, a full disk): OpenAI's and Anthropic's SDKs would otherwise retry it. A model too
    // large for this box is a 503 all the same, which a load balancer retries on another box
    // (docs/several-boxes.md).
    const auto type = status == 503 && body.is_object() && body.contains("error") && body["error"].is_object()
                          ? body["error"].value("type", std::string())
                          : std::string();
    const bool too_large_here = type == "insufficient_memory" || type == "engine_missing";
    if (status == 400 || status == 401 || status == 404 || status == 405 || status == 409 || status == 413 ||
        status == 507 || too_large_here)
        res.set("x-should-retry", "false");
    res.keep_alive(keep_alive);
    res.body() = dump(body);
    res.prepare_payload();
    co_await core::io_now::write_message(stream, res, std::chrono::seconds(30));
}

asio::awaitable<void> write_text(beast::tcp_stream& stream, unsigned version, bool keep_alive,
                                 unsigned status, std::string_view content_type, std::string body) {
    bhttp::response<bhttp::string_body> res{static_cast<bhttp::status>(status), version};
    res.set(bhttp::field::server, "loch");
    res.set(bhttp::field::content_type, content_type);
    res.keep_alive(keep_alive);
    res.body() = std::move(body);
    res.prepare_payload();
    co_await core::io_now::write_message(stream, res, std::chrono::seconds(30));
}

asio::awaitable<void> write_head(beast::tcp_stream& stream, unsigned version, bool keep_alive,
                                 unsigned status, std::string_view content_type, std::size_t body_bytes,
                                 const std::string& allow) {
    bhttp::response<bhttp::empty_body> res{static_cast<bhttp::status>(status), version};
    res.set(bhttp::field::server, "loch");
    res.set(bhttp::field::content_type, content_type);
    if (!allow.empty()) res.set(bhttp::field::allow, allow);
    res.keep_alive(keep_alive);
    res.content_length(body_bytes);
    co_await core::io_now::write_message(stream, res, std::chrono::seconds(30));
}

asio::awaitable<void> write_error(beast::tcp_stream& stream, unsigned version, bool keep_alive,
                                  const broker::Error& e, const std::string& allow) {
    co_await write_json(stream, version, keep_alive, static_cast<unsigned>(status_of(e.kind())),
                        error_body(e), e.retry_after_s(), allow);
}

asio::awaitable<void> drain_before_close(beast::tcp_stream& stream) {
    beast::error_code sec;
    stream.socket().shutdown(asio::socket_base::shutdown_send, sec);
    char sink[16 * 1024];
    for (std::uint64_t drained = 0; drained < 64ull * 1024 * 1024;) {
        stream.expires_after(std::chrono::seconds(2));
        auto [dec, dn] =
            co_await stream.async_read_some(asio::buffer(sink), asio::as_tuple(asio::use_awaitable));
        if (dec) break;
        drained += dn;
    }
}

}  // namespace loch::http
