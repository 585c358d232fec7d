// http/json_body — a client's JSON body, parsed; or an invalid_request (400) that says where it breaks: the
// byte, line and column, and what the parser expected there — so a hand-written curl body can be fixed
// without guessing.
#pragma once

#include <string_view>

#include <nlohmann/json.hpp>

namespace loch::http {

// Throws broker::Error (invalid_request) for a body that is not JSON; any JSON value is returned (whether
// it must be an object is the caller's rule).
nlohmann::json parse_json_body(std::string_view body);

}  // namespace loch::http
