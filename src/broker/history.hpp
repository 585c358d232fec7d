// broker/history — the last hour as the dashboard draws it (issue 54): per device, what each holder reserved
// (bytes and source) and what other programs used, after every change; the queue's length after every
// change; marks where a model was evicted or refused. A point is added only when something changed — an idle
// loch adds none (issue 55) — and points older than the window go as new ones come. Pure: the broker feeds
// it from its events and its tick.
#pragma once

#include <chrono>
#include <cstdint>
#include <deque>
#include <map>
#include <string>
#include <vector>

#include <nlohmann/json_fwd.hpp>

namespace loch::broker {

struct HistoryHolder {
    std::string name;  // an engine or hold, or "outside" (programs loch did not start)
    std::uint64_t bytes = 0;
    std::string source;  // measured | engine-dry-run | formula | configured
};

class History {
  public:
    using Clock = std::chrono::steady_clock;
    explicit History(Clock::duration window = std::chrono::hours(1)) : window_(window) {}

    // The device's holders now. A point when they differ from the last one (an outside figure counts as
    // changed when it moved by at least kOutsideStep: the probe's reading of other programs drifts).
    void memory(Clock::time_point t, const std::string& device, std::vector<HistoryHolder> holders);
    void queue(Clock::time_point t, std::size_t waiting);
    // kind: "evict" | "refused" | "queue_timeout" | "oom_at_load" …
    void mark(Clock::time_point t, std::string kind, std::string model, std::string device,
              std::string message);

    // {window_s, devices: {id: [{t, holders: [{name, bytes, source}]}]}, queue: [{t, waiting}],
    //  marks: [{t, kind, model, device, message}]} — t in seconds relative to `now` (≤ 0). Each device's and
    // the queue's first point is the last one before the window, moved to its start, so a plot starts level.
    nlohmann::json to_json(Clock::time_point now) const;

    static constexpr std::uint64_t kOutsideStep = 64ull << 20;
    static constexpr std::size_t kMaxPoints = 20000;  // per series: a bound whatever the churn

  private:
    struct MemoryPoint {
        Clock::time_point t;
        std::vector<HistoryHolder> holders;
    };
    struct QueuePoint {
        Clock::time_point t;
        std::size_t waiting = 0;
    };
    struct Mark {
        Clock::time_point t;
        std::string kind, model, device, message;
    };
    template <class Points>
    void trim(Points& points, Clock::time_point now) const;

    Clock::duration window_;
    std::map<std::string, std::deque<MemoryPoint>> memory_;
    std::deque<QueuePoint> queue_;
    std::deque<Mark> marks_;
};

}  // namespace loch::broker
