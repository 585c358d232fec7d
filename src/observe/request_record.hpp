// observe/request_record — what loch knows about one finished model request: who asked for what, how long
// it queued and why, what admission decided, time to first token, tokens, duration and how it ended. The
// HTTP layer fills one per request; the request log (observe/request_log) writes it and the metrics
// (observe/metrics) count it.
#pragma once

#include <chrono>
#include <cstdint>
#include <optional>
#include <string>

#include <nlohmann/json.hpp>

namespace loch::observe {

struct RequestRecord {
    std::string id;        // X-Request-Id from the client (checked), else loch's own
    std::string model;     // as configured (an alias is resolved by the broker; here as asked when unknown)
    std::string route;     // the client's API path: /v1/chat/completions, /api/chat, …
    std::string priority;  // interactive | batch (empty when it never reached the broker)
    bool stream = false;
    double queue_wait_s = 0;
    std::string decision;  // "ready", or what admission said when it queued ("cold start on cpu: …")
    std::optional<double> ttft_s;  // first streamed event (streams only)
    std::optional<std::uint64_t> prompt_tokens, completion_tokens;
    // Images and audio (their engines' issues fill them): seconds per sampling step, real-time factor.
    std::optional<double> seconds_per_step, real_time_factor;
    // A saved conversation restored for it (broker/saved_slots.hpp): the tokens the engine did not re-read.
    std::optional<std::uint64_t> restored_tokens;
    std::optional<nlohmann::json> restore;       // what was restored, until the answer says if it took
    std::optional<std::uint64_t> cached_tokens;  // prompt tokens the engine reused (its answer's figure)
    bool restore_failed = false;                 // a restore whose answer re-read the prompt
    double duration_s = 0;
    unsigned status = 0;     // the HTTP status the client got (200 also for a stream that ended by an error)
    std::string error_type;  // loch's error.type, "" when it succeeded
    bool client_gone = false;
    std::chrono::system_clock::time_point at = std::chrono::system_clock::now();  // when it arrived

    // "ok", the error type, "http_<status>" for an error status no type names, or "client_gone": the outcome
    // label of loch_requests_total.
    std::string outcome() const;
    // Generated tokens per second after the first one (streams with a count and a TTFT).
    std::optional<double> tokens_per_second() const;
};

nlohmann::json to_json(const RequestRecord& r);
// The same object as one line of JSON text (the request log's), written directly: building the DOM and
// dumping it was a tenth of loch's CPU per proxied request. Keys in reading order (at, id, model, route, …);
// strings escaped by nlohmann's serializer unless they are plain printable ASCII; a value that is not a
// finite number is null, as nlohmann writes it. Parses back to exactly to_json(r) (tested).
std::string to_json_line(const RequestRecord& r);

// A request id the client sent that is safe to log and echo: 1–64 of [A-Za-z0-9._-]; else nullopt.
std::optional<std::string> checked_request_id(std::string_view given);

}  // namespace loch::observe
