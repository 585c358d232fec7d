#include "broker/history.hpp"

#include <algorithm>

#include <nlohmann/json.hpp>

namespace loch::broker {

namespace {

// Whether `now` differs from `last` enough to be a new point: another holder, another figure or source, or
// the outside use moved by a step.
bool changed(const std::vector<HistoryHolder>& last, const std::vector<HistoryHolder>& now) {
    if (last.size() != now.size()) return true;
    for (std::size_t i = 0; i < now.size(); ++i) {
        const auto& a = last[i];
        const auto& b = now[i];
        if (a.name != b.name || a.source != b.source) return true;
        if (b.name == "outside") {
            const auto d = a.bytes > b.bytes ? a.bytes - b.bytes : b.bytes - a.bytes;
            if (d >= History::kOutsideStep) return true;
        } else if (a.bytes != b.bytes) {
            return true;
        }
    }
    return false;
}

double seconds(History::Clock::duration d) {
    return std::chrono::duration<double>(d).count();
}

}  // namespace

// Keeps the last point before the window (what held the memory when the window starts), drops the older.
template <class Points>
void History::trim(Points& points, Clock::time_point now) const {
    const auto from = now - window_;
    while (points.size() > 1 && (points[1].t <= from || points.size() > kMaxPoints)) points.pop_front();
}

void History::memory(Clock::time_point t, const std::string& device, std::vector<HistoryHolder> holders) {
    auto& points = memory_[device];
    if (!points.empty() && !changed(points.back().holders, holders)) return;
    points.push_back({t, std::move(holders)});
    trim(points, t);
}

void History::queue(Clock::time_point t, std::size_t waiting) {
    if (!queue_.empty() && queue_.back().waiting == waiting) return;
    queue_.push_back({t, waiting});
    trim(queue_, t);
}

void History::mark(Clock::time_point t, std::string kind, std::string model, std::string device,
                   std::string message) {
    marks_.push_back({t, std::move(kind), std::move(model), std::move(device), std::move(message)});
    while (!marks_.empty() && (marks_.front().t < t - window_ || marks_.size() > kMaxPoints))
        marks_.pop_front();
}

nlohmann::json History::to_json(Clock::time_point now) const {
    const auto from = now - window_;
    const auto at = [&](Clock::time_point t) { return seconds(std::max(t, from) - now); };
    nlohmann::json devices = nlohmann::json::object();
    for (const auto& [device, points] : memory_) {
        auto out = nlohmann::json::array();
        for (std::size_t i = 0; i < points.size(); ++i) {
            // A point before the window counts only as the state the window starts with.
            if (i + 1 < points.size() && points[i + 1].t <= from) continue;
            auto holders = nlohmann::json::array();
            for (const auto& h : points[i].holders)
                holders.push_back({{"name", h.name}, {"bytes", h.bytes}, {"source", h.source}});
            out.push_back({{"t", at(points[i].t)}, {"holders", std::move(holders)}});
        }
        devices[device] = std::move(out);
    }
    auto queue = nlohmann::json::array();
    for (std::size_t i = 0; i < queue_.size(); ++i) {
        if (i + 1 < queue_.size() && queue_[i + 1].t <= from) continue;
        queue.push_back({{"t", at(queue_[i].t)}, {"waiting", queue_[i].waiting}});
    }
    auto marks = nlohmann::json::array();
    for (const auto& m : marks_)
        if (m.t >= from)
            marks.push_back({{"t", seconds(m.t - now)},
                             {"kind", m.kind},
                             {"model", m.model},
                             {"device", m.device},
                             {"message", m.message}});
    return {{"window_s", seconds(window_)},
            {"devices", std::move(devices)},
            {"queue", std::move(queue)},
            {"marks", std::move(marks)}};
}

}  // namespace loch::broker
