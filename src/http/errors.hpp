// http/errors — the ONE place where an error becomes an HTTP response: status per kind, the JSON body
// {"error":{"type","message",...numbers}}, Retry-After where waiting helps, and the SSE form used once a
// stream has started. docs/broker.md lists every type with its status and why.
#pragma once

#include <string>

#include <boost/beast/http/status.hpp>
#include <nlohmann/json.hpp>

#include "broker/error.hpp"

namespace loch::http {

boost::beast::http::status status_of(broker::ErrorKind kind);

// {"error":{"type":…,"message":…,<details…>}}; details never overwrite type/message.
nlohmann::json error_body(const broker::Error& e);

// The error as a Server-Sent Event for a stream whose headers are already out:
// "event: error\ndata: {"error":{...}}\n\n".
std::string sse_error_event(const broker::Error& e);

}  // namespace loch::http
