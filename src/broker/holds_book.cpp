// broker/holds_book — the holds' state (holds_book.hpp says what it owns).
#include "broker/holds_book.hpp"

#include <fmt/format.h>

namespace loch::broker {

std::unique_ptr<Hold> HoldsBook::make(Hold::time_point now) {
    auto h = std::make_unique<Hold>();
    h->id = fmt::format("hold-{}", next_++);
    h->since = h->heartbeat = now;
    return h;
}

Hold& HoldsBook::add(std::unique_ptr<Hold> h) {
    Hold& ref = *h;
    live_[ref.id] = std::move(h);
    return ref;
}

Hold* HoldsBook::find(const std::string& id) {
    const auto it = live_.find(id);
    return it == live_.end() ? nullptr : it->second.get();
}

const Hold* HoldsBook::find(const std::string& id) const {
    const auto it = live_.find(id);
    return it == live_.end() ? nullptr : it->second.get();
}

const Hold* HoldsBook::find_ended(const std::string& id) const {
    for (auto it = ended_.rbegin(); it != ended_.rend(); ++it)
        if ((*it)->id == id) return it->get();
    return nullptr;
}

Hold* HoldsBook::queued(std::uint64_t queue_id) {
    const auto it = queued_.find(queue_id);
    return it == queued_.end() ? nullptr : it->second;
}

std::vector<std::uint64_t> HoldsBook::dequeue_all(const Hold& h) {
    std::vector<std::uint64_t> ids;
    for (auto it = queued_.begin(); it != queued_.end();)
        if (it->second == &h) {
            ids.push_back(it->first);
            it = queued_.erase(it);
        } else {
            ++it;
        }
    return ids;
}

void HoldsBook::retire(const Hold& h) {
    auto node = live_.extract(h.id);
    if (node.empty()) return;
    ended_.push_back(std::move(node.mapped()));
    while (ended_.size() > kEndedKept) ended_.pop_front();
}

std::optional<double> HoldsBook::last_run_s(const std::string& job) const {
    const auto it = run_s_.find(job);
    return it == run_s_.end() ? std::nullopt : std::optional(it->second);
}

}  // namespace loch::broker
