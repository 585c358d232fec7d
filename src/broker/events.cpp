// broker/events — the recent events and their log lines (events.hpp says what an event is).
#include "broker/events.hpp"

#include <chrono>

#include <spdlog/spdlog.h>

#include "core/time_text.hpp"

namespace loch::broker {

void RecentEvents::note(std::string_view kind, const nlohmann::json& subject, std::string message,
                        nlohmann::json extra, bool warn) {
    std::string who;
    for (const char* k : {"model", "hold", "holder"})
        if (who.empty() && subject.contains(k)) who = subject[k].get<std::string>();
    if (warn)
        spdlog::warn("{} '{}': {}", kind, who, message);
    else
        spdlog::info("{} '{}': {}", kind, who, message);
    nlohmann::json e = extra.is_object() ? std::move(extra) : nlohmann::json::object();
    e["at"] = iso8601_utc(std::chrono::system_clock::now());
    e["kind"] = kind;
    for (const auto& [k, v] : subject.items()) e[k] = v;
    e["message"] = std::move(message);
    kept_.push_back(std::move(e));
    while (kept_.size() > kKept) kept_.pop_front();
}

nlohmann::json RecentEvents::recent() const {
    nlohmann::json out = nlohmann::json::array();
    for (const auto& e : kept_) out.push_back(e);
    return out;
}

}  // namespace loch::broker
