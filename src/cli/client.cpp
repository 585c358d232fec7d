#include "cli/client.hpp"

#include <charconv>
#include <stdexcept>

#include <boost/asio/co_spawn.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/use_future.hpp>

#include "core/http_client.hpp"

namespace loch::cli {

namespace asio = boost::asio;

ServerAddress parse_url(const std::string& url) {
    std::string_view s = url;
    if (s.starts_with("http://")) s.remove_prefix(7);
    if (s.starts_with("https://")) throw std::invalid_argument("--url: loch serves plain http on localhost");
    if (auto slash = s.find('/'); slash != std::string_view::npos) s = s.substr(0, slash);
    ServerAddress a;
    const auto colon = s.rfind(':');
    a.host = std::string(s.substr(0, colon));
    if (a.host == "localhost") a.host = "127.0.0.1";
    if (colon != std::string_view::npos) {
        const auto p = s.substr(colon + 1);
        unsigned v = 0;
        auto [end, ec] = std::from_chars(p.data(), p.data() + p.size(), v);
        if (ec != std::errc() || end != p.data() + p.size() || v == 0 || v > 65535)
            throw std::invalid_argument("--url '" + url + "': the port must be 1-65535");
        a.port = static_cast<std::uint16_t>(v);
    }
    if (a.host.empty()) throw std::invalid_argument("--url '" + url + "' names no host");
    return a;
}

LochReply exchange_loch(const ServerAddress& to, const std::string& method, const std::string& target,
                        const std::string& body, std::chrono::seconds timeout) {
    asio::io_context io;
    core::HttpCall call;
    call.method = method;
    call.target = target;
    call.body = body;
    call.timeout = std::chrono::duration_cast<std::chrono::milliseconds>(timeout);
    if (!to.api_key.empty()) call.headers.emplace_back("Authorization", "Bearer " + to.api_key);
    auto reply = asio::co_spawn(
        io, core::http_exchange(io.get_executor(), {to.host, to.port}, std::move(call)), asio::use_future);
    io.run();
    const auto r = reply.get();
    LochReply out;
    out.status = r.status;
    out.body = r.body;
    if (r.status == 0)
        out.error = "cannot reach loch at http://" + to.host + ":" + std::to_string(to.port) + ": " +
                    r.error + " (is `loch serve` running? --url)";
    auto j = nlohmann::json::parse(r.body, nullptr, false);
    if (!j.is_discarded()) out.json = std::move(j);
    return out;
}

std::string LochReply::message() const {
    if (status == 0) return error;
    if (json.is_object() && json.contains("error") && json["error"].is_object())
        return json["error"].value("message", body) + " (HTTP " + std::to_string(status) + ")";
    return "loch answered HTTP " + std::to_string(status) + ": " + body.substr(0, 200);
}

nlohmann::json call_loch(const ServerAddress& to, const std::string& method, const std::string& target,
                         std::chrono::seconds timeout) {
    const auto r = exchange_loch(to, method, target, method == "POST" ? "{}" : "", timeout);
    if (r.status == 0 || r.status >= 400) throw std::runtime_error(r.message());
    if (r.json.is_null())
        throw std::runtime_error("loch answered something that is not JSON: " + r.body.substr(0, 200));
    return r.json;
}

void follow_loch(const ServerAddress& to, const std::string& target,
                 const std::function<void(const std::string&)>& on_data) {
    asio::io_context io;
    core::HttpCall call;
    call.target = target;
    if (!to.api_key.empty()) call.headers.emplace_back("Authorization", "Bearer " + to.api_key);
    std::string pending;
    const auto events = [&](std::string_view piece) {
        pending.append(piece);
        for (std::size_t at; (at = pending.find("\n\n")) != std::string::npos;) {
            const std::string event = pending.substr(0, at);
            pending.erase(0, at + 2);
            if (!event.starts_with("data: ")) continue;
            const auto j = nlohmann::json::parse(event.substr(6), nullptr, false);
            on_data(!j.is_discarded() && j.is_string() ? j.get<std::string>() : event.substr(6));
        }
    };
    auto reply =
        asio::co_spawn(io, core::http_stream(io.get_executor(), {to.host, to.port}, std::move(call), events),
                       asio::use_future);
    io.run();
    const auto r = reply.get();
    if (r.status == 0)
        throw std::runtime_error("cannot reach loch at " + to.host + ":" + std::to_string(to.port) + ": " +
                                 r.error);
    if (r.status >= 400) {
        auto j = nlohmann::json::parse(r.body, nullptr, false);
        throw std::runtime_error(!j.is_discarded() && j.contains("error") ? j["error"].value("message", "")
                                                                          : r.body);
    }
}

}  // namespace loch::cli
