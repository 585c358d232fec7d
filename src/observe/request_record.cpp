#include "observe/request_record.hpp"

#include <algorithm>
#include <cctype>
#include <charconv>
#include <cmath>

#include "core/json_text.hpp"
#include "core/time_text.hpp"

namespace loch::observe {

std::string RequestRecord::outcome() const {
    if (client_gone) return "client_gone";
    if (!error_type.empty()) return error_type;
    // An error status nobody named (an engine's answer relayed as it came) is still no success.
    return status >= 400 ? "http_" + std::to_string(status) : "ok";
}

std::optional<double> RequestRecord::tokens_per_second() const {
    if (!completion_tokens || *completion_tokens < 2) return std::nullopt;
    const double start = ttft_s.value_or(0);
    const double took = duration_s - start;
    if (took <= 0) return std::nullopt;
    return double(*completion_tokens - (ttft_s ? 1 : 0)) / took;
}

nlohmann::json to_json(const RequestRecord& r) {
    nlohmann::json j = {{"at", iso8601_utc(r.at)},
                        {"id", r.id},
                        {"model", r.model},
                        {"route", r.route},
                        {"priority", r.priority},
                        {"stream", r.stream},
                        {"queue_wait_s", r.queue_wait_s},
                        {"decision", r.decision},
                        {"duration_s", r.duration_s},
                        {"status", r.status},
                        {"outcome", r.outcome()}};
    if (r.ttft_s) j["ttft_s"] = *r.ttft_s;
    if (r.prompt_tokens) j["prompt_tokens"] = *r.prompt_tokens;
    if (r.completion_tokens) j["completion_tokens"] = *r.completion_tokens;
    if (auto tps = r.tokens_per_second()) j["tokens_per_s"] = *tps;
    if (r.seconds_per_step) j["seconds_per_step"] = *r.seconds_per_step;
    if (r.real_time_factor) j["real_time_factor"] = *r.real_time_factor;
    if (r.cached_tokens) j["cached_tokens"] = *r.cached_tokens;
    if (r.restored_tokens) j["restored_tokens"] = *r.restored_tokens;
    if (r.restore_failed) j["restore_failed"] = true;
    if (!r.error_type.empty()) j["error_type"] = r.error_type;
    return j;
}

namespace {

void append_string(std::string& out, std::string_view s) {
    const bool plain = std::all_of(s.begin(), s.end(), [](char c) {
        const auto u = static_cast<unsigned char>(c);
        return u >= 0x20 && u < 0x7f && c != '"' && c != '\\';
    });
    if (plain) {
        out += '"';
        out.append(s);
        out += '"';
        return;
    }
    out += core::json_text(nlohmann::json(std::string(s)));
}

// std::to_chars: the shortest text that reads back as the same double (or integer), without fmt's format
// string machinery — this is on every request's log line.
template <class T>
void append_chars(std::string& out, T v) {
    char buf[32];
    const auto end = std::to_chars(buf, buf + sizeof buf, v).ptr;
    out.append(buf, end);
}

void append_number(std::string& out, double v) {
    if (std::isfinite(v))
        append_chars(out, v);
    else
        out += "null";
}

}  // namespace

std::string to_json_line(const RequestRecord& r) {
    std::string out;
    out.reserve(320);
    const auto key = [&](std::string_view k) {
        out += out.empty() ? "{\"" : ",\"";
        out.append(k);
        out += "\":";
    };
    const auto str = [&](std::string_view k, std::string_view v) {
        key(k);
        append_string(out, v);
    };
    const auto num = [&](std::string_view k, double v) {
        key(k);
        append_number(out, v);
    };
    const auto count = [&](std::string_view k, std::uint64_t v) {
        key(k);
        append_chars(out, v);
    };
    str("at", iso8601_utc(r.at));
    str("id", r.id);
    str("model", r.model);
    str("route", r.route);
    str("priority", r.priority);
    key("stream");
    out += r.stream ? "true" : "false";
    num("queue_wait_s", r.queue_wait_s);
    str("decision", r.decision);
    num("duration_s", r.duration_s);
    count("status", r.status);
    str("outcome", r.outcome());
    if (r.ttft_s) num("ttft_s", *r.ttft_s);
    if (r.prompt_tokens) count("prompt_tokens", *r.prompt_tokens);
    if (r.completion_tokens) count("completion_tokens", *r.completion_tokens);
    if (auto tps = r.tokens_per_second()) num("tokens_per_s", *tps);
    if (r.seconds_per_step) num("seconds_per_step", *r.seconds_per_step);
    if (r.real_time_factor) num("real_time_factor", *r.real_time_factor);
    if (r.cached_tokens) count("cached_tokens", *r.cached_tokens);
    if (r.restored_tokens) count("restored_tokens", *r.restored_tokens);
    if (r.restore_failed) {
        key("restore_failed");
        out += "true";
    }
    if (!r.error_type.empty()) str("error_type", r.error_type);
    out += '}';
    return out;
}

std::optional<std::string> checked_request_id(std::string_view given) {
    if (given.empty() || given.size() > 64) return std::nullopt;
    const bool ok = std::all_of(given.begin(), given.end(), [](unsigned char c) {
        return std::isalnum(c) || c == '.' || c == '_' || c == '-';
    });
    if (!ok) return std::nullopt;
    return std::string(given);
}

}  // namespace loch::observe
