#include "broker/tick_decision.hpp"

#include <algorithm>

#include <fmt/format.h>

namespace loch::broker {

namespace {
bool may_expire(const IdleFacts& e) {
    return e.state == ModelState::ready && !e.pinned && e.keep_alive.has_value();
}
}  // namespace

std::vector<StopIdle> expired_engines(const std::vector<IdleFacts>& engines, TickTime now) {
    std::vector<StopIdle> out;
    for (const auto& e : engines) {
        if (!may_expire(e) || e.active > 0 || e.wanted) continue;
        const auto idle = now - e.last_used;
        if (idle < *e.keep_alive) continue;
        out.push_back({e.model, fmt::format("idle for {} s (keep_alive {} s)",
                                            std::chrono::duration_cast<std::chrono::seconds>(idle).count(),
                                            e.keep_alive->count())});
    }
    return out;
}

std::chrono::steady_clock::duration until_next_expiry(const std::vector<IdleFacts>& engines, TickTime now,
                                                      std::chrono::steady_clock::duration cap) {
    auto next = cap;
    for (const auto& e : engines)
        if (may_expire(e))
            next = std::min<std::chrono::steady_clock::duration>(next, e.last_used + *e.keep_alive - now);
    return next;
}

std::optional<Relief> relieve_overcommit(std::uint64_t capacity, std::uint64_t booked,
                                         std::vector<IdleHolder> idle) {
    if (booked <= capacity) return std::nullopt;
    std::stable_sort(idle.begin(), idle.end(),
                     [](const IdleHolder& a, const IdleHolder& b) { return a.last_used < b.last_used; });
    Relief r{booked - capacity, {}};
    std::uint64_t freed = 0;
    for (const auto& h : idle) {
        if (freed >= r.over) break;
        freed += h.reserved;
        r.victims.push_back(h.name);
    }
    return r;
}

}  // namespace loch::broker
