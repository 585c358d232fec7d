// core/json_text — JSON as text for the outside world (responses, stream events, logs, stored records). A
// string loch did not write (an engine's answer, a client's prompt) may hold invalid UTF-8: it is replaced
// with U+FFFD rather than thrown on in the middle of a response.
#pragma once

#include <string>

#include <nlohmann/json.hpp>

namespace loch::core {

inline std::string json_text(const nlohmann::json& j, int indent = -1) {
    return j.dump(indent, ' ', false, nlohmann::json::error_handler_t::replace);
}

}  // namespace loch::core
