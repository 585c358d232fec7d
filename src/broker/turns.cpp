// broker/turns — equal-priority work for different models on a shared device is served in bounded time
// (issue 51). Member functions of Broker (broker.hpp).
//
// A ready engine with a free slot takes a new request at once — except while another model's request of
// equal or higher priority waits for what this engine's running requests hold:
//   - the CPU's cores (cpu_threads.cpp): it waits from the first moment, since the cores free the instant
//     the engine's running requests end — the engine drains, the other goes, and the same rule then holds
//     the other to it, so two streams alternate instead of one starving the other until max_wait (the
//     2-core fault run: all 20 requests of the second model timed out);
//   - a device's memory held by a busy engine: only after it has waited `memory_turn_after`, since a turn
//     costs a swap (the busy engine drains, goes idle, and admission evicts it for the waiter like any idle
//     engine, its own queued requests no longer keeping it: holds.cpp); under light contention the engine
//     keeps its stream and the waiter its place. Turns go by age: an engine yields only to a request older
//     than its own oldest waiting one, so two never hold each other.
// The engine's running requests finish; only new ones wait, so a waiter waits at most for the requests that
// run when its turn comes.
#include <algorithm>

#include <fmt/format.h>

#include "broker/broker.hpp"
#include "broker/model_state.hpp"
#include "broker/wait_queue.hpp"

namespace loch::broker {

std::optional<std::string> Broker::turn_wait(const Model& m, config::Priority priority) const {
    if (auto cores = cpu_threads_wait(m, priority)) return cores;
    if (!policy_->takes_turns() || m.active == 0) return std::nullopt;
    const auto now = this->now();
    const auto mine_since = oldest_wait(m);
    // Each other model's CPU wait is asked once per call (a batch can queue thousands of requests).
    std::vector<std::pair<const Model*, config::Priority>> asked;
    for (const auto& [id, w] : waiters_) {
        const Model& o = *w->model;
        if (w->granted || w->error || &o == &m) continue;
        const auto theirs = priority_of(o, w->needs);
        if (rank(theirs) < rank(priority)) continue;
        const bool first = std::ranges::find(asked, std::pair{&o, theirs}) == asked.end();
        if (first) asked.emplace_back(&o, theirs);
        if (first && o.state == ModelState::ready && cpu_threads_wait(o, theirs))
            return fmt::format(
                "a request for '{}' waits for the CPU's cores that '{}' computes with: '{}' takes no new "
                "request until that one has had its turn",
                o.name(), m.name(), m.name());
        if (o.waits_for_room && now - w->since >= options_.memory_turn_after && w->since < mine_since) {
            const auto theirs_devices = allowed_devices(o);
            if (std::ranges::find(theirs_devices, m.device) != theirs_devices.end())
                return fmt::format(
                    "a request for '{}' has waited {} s for room on {} that '{}' holds: '{}' takes no new "
                    "request until that one has had its turn",
                    o.name(), std::chrono::duration_cast<std::chrono::seconds>(now - w->since).count(),
                    m.device, m.name(), m.name());
        }
    }
    return std::nullopt;
}

std::chrono::steady_clock::time_point Broker::oldest_wait(const Model& m) const {
    auto oldest = Clock::time_point::max();
    for (const auto& [id, w] : waiters_)
        if (w->model == &m && !w->granted && !w->error) oldest = std::min(oldest, w->since);
    return oldest;
}

bool Broker::has_memory_turn(const Model& m) const {
    if (!policy_->takes_turns()) return false;
    const auto oldest = oldest_wait(m);
    return oldest != Clock::time_point::max() && now() - oldest >= options_.memory_turn_after;
}

}  // namespace loch::broker
