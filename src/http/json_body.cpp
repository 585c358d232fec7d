#include "http/json_body.hpp"

#include <algorithm>
#include <string>

#include <fmt/format.h>

#include "broker/error.hpp"

namespace loch::http {

nlohmann::json parse_json_body(std::string_view body) {
    if (body.find_first_not_of(" \t\r\n") == std::string_view::npos)
        throw broker::Error(broker::ErrorKind::invalid_request,
                            "the request body is empty: send a JSON object", {{"body_bytes", body.size()}});
    try {
        return nlohmann::json::parse(body);
    } catch (const nlohmann::json::parse_error& e) {
        // e.byte: how many bytes the parser had read when it failed (1-based: the offending one).
        const std::size_t at = std::min<std::size_t>(e.byte, body.size());
        const auto before = body.substr(0, at == 0 ? 0 : at - 1);
        const std::size_t line = 1 + static_cast<std::size_t>(std::count(before.begin(), before.end(), '\n'));
        const auto nl = before.rfind('\n');
        const std::size_t column = nl == std::string_view::npos ? at : at - 1 - nl;
        // nlohmann's own text after its "parse error at line L, column C: " prefix says what it expected.
        std::string what = e.what();
        if (const auto colon = what.find(": syntax error"); colon != std::string::npos)
            what = what.substr(colon + 2);
        const bool early = e.byte > body.size();
        throw broker::Error(
            broker::ErrorKind::invalid_request,
            early ? fmt::format("the request body is not valid JSON: it ends early (after {} bytes): {}",
                                body.size(), what)
                  : fmt::format("the request body is not valid JSON at line {}, column {} (byte {}): {}",
                                line, column, at, what),
            {{"body_bytes", body.size()}, {"byte", at}, {"line", line}, {"column", column}});
    } catch (const nlohmann::json::exception& e) {
        // JSON-shaped, but a value cannot be held: a number beyond a double's range (nlohmann's 406).
        throw broker::Error(broker::ErrorKind::invalid_request,
                            e.id == 406
                                ? "the request body holds a number beyond a double's range (about "
                                  "±1.8e308): send a smaller one"
                                : fmt::format("the request body cannot be read as JSON: {}", e.what()),
                            {{"body_bytes", body.size()}});
    }
}

}  // namespace loch::http
