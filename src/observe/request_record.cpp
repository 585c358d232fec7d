#include "observe/request_record.hpp"

#include <algorithm>
#include <cctype>

#include "core/time_text.hpp"

namespace loch::observe {

std::string RequestRecord::outcome() const {
    if (client_gone) return "client_gone";
    return error_type.empty() ? "ok" : error_type;
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
    if (!r.error_type.empty()) j["error_type"] = r.error_type;
    return j;
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
