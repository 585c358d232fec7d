// http/engine_answer — what an engine's answer, or its failure, means for loch's client: the usage figures
// it reports (for the request log and a restore's check), its error answer as loch's error, a refusal its
// kind made before the request went out, and a broken upstream turned into the right error (shutting down,
// the stream's watchdog, the engine hung or died — with its exit report — or the connection broke).
#pragma once

#include <chrono>
#include <optional>
#include <string>
#include <string_view>

#include <boost/asio/awaitable.hpp>
#include <boost/system/error_code.hpp>
#include <nlohmann/json.hpp>

#include "broker/broker.hpp"
#include "observe/request_record.hpp"

namespace loch::http {

// What the engine's answer says it used: OpenAI's `usage`, or llama-server's `timings`.
void take_usage(const nlohmann::json& j, observe::RequestRecord& rec);
// The same from a whole JSON answer without parsing it (on every request's path); the cached tokens only
// after a restore (rec.restore), the one answer whose reuse is checked.
void take_usage_scan(std::string_view body, observe::RequestRecord& rec);
// The engine's error answer as loch's error (a JSON answer after the SSE head went out can only be told as
// an event).
broker::Error engine_answer_error(unsigned status, std::string_view body, const std::string& model);
// The model's kind refused the request before it was sent.
broker::Error refusal_error(const std::string& model, engines::Refusal no);
// What an upstream failure means for the client: `abort` (loch is shutting down), a stream's watchdog, the
// engine hung (its health watch killed it: a non-streamed answer sends nothing until done, so that watch,
// not silence on the socket, is its watchdog), or it died (with its exit report when it ended within a
// moment), or the connection broke.
boost::asio::awaitable<broker::Error> upstream_failure(broker::BrokerView& broker, const broker::Lease& lease,
                                                       bool stream, std::chrono::seconds watchdog,
                                                       const std::optional<broker::Error>& abort,
                                                       boost::system::error_code ec);

}  // namespace loch::http
