#include "broker/wait_queue.hpp"

#include <algorithm>

namespace loch::broker {

int rank(Priority p) {
    return p == Priority::interactive ? 1 : 0;
}

bool WaitQueue::push(std::uint64_t id, Priority p, Clock::time_point now) {
    if (size(p) >= capacity(p)) return false;
    entries_.push_back({id, p, now, next_seq_++});
    return true;
}

bool WaitQueue::remove(std::uint64_t id) {
    return std::erase_if(entries_, [&](const Entry& e) { return e.id == id; }) > 0;
}

bool WaitQueue::contains(std::uint64_t id) const {
    return std::any_of(entries_.begin(), entries_.end(), [&](const Entry& e) { return e.id == id; });
}

std::size_t WaitQueue::size(Priority p) const {
    return static_cast<std::size_t>(
        std::count_if(entries_.begin(), entries_.end(), [&](const Entry& e) { return e.priority == p; }));
}

std::vector<std::uint64_t> WaitQueue::order(Clock::time_point now) const {
    auto effective = [&](const Entry& e) {
        if (e.priority == Priority::interactive) return 1;
        return now - e.since >= aging_ ? 1 : 0;
    };
    std::vector<const Entry*> sorted;
    for (const auto& e : entries_) sorted.push_back(&e);
    std::stable_sort(sorted.begin(), sorted.end(), [&](const Entry* a, const Entry* b) {
        const int ea = effective(*a), eb = effective(*b);
        if (ea != eb) return ea > eb;
        if (a->since != b->since) return a->since < b->since;
        return a->seq < b->seq;
    });
    std::vector<std::uint64_t> out;
    out.reserve(sorted.size());
    for (const auto* e : sorted) out.push_back(e->id);
    return out;
}

}  // namespace loch::broker
