#include "broker/eta.hpp"

#include <algorithm>
#include <cmath>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "core/memory.hpp"

namespace loch::broker {

void to_json(nlohmann::json& j, const Eta& e) {
    j = {{"eta_s", e.seconds ? nlohmann::json(std::round(*e.seconds * 10) / 10) : nlohmann::json(nullptr)},
         {"eta", e.basis}};
}

Eta slot_eta(const SlotWait& w) {
    const std::uint32_t slots = std::max<std::uint32_t>(1, w.slots);
    double t = 0;
    std::string basis;
    if (w.loading) {
        if (!w.load_s) return {std::nullopt, "unknown: the model loads and no earlier load was timed"};
        t = std::max(0.0, *w.load_s - w.loading_elapsed_s);
        basis = fmt::format("loading: {:.0f} s left of the last load's {:.1f} s", t, *w.load_s);
    }
    // Requests that must finish before it gets a slot: those ahead of it beyond the free slots, and one round
    // of the running ones when every slot is taken.
    const std::size_t busy = w.loading ? 0 : w.active;
    const std::size_t before = busy + w.ahead;
    if (before < slots) return {t, basis.empty() ? "a slot is free" : basis};
    const std::size_t rounds = (before - slots) / slots + 1;
    if (!w.avg_request_s)
        return {std::nullopt, "unknown: no request of this model has finished yet to time one"};
    t += double(rounds) * *w.avg_request_s;
    basis += fmt::format("{}{} round(s) of {} slot(s) at {:.1f} s per request (measured mean)",
                         basis.empty() ? "" : "; then ", rounds, slots, *w.avg_request_s);
    return {t, basis};
}

Eta memory_eta(std::uint64_t need, std::uint64_t free, std::vector<HolderEnd> holders) {
    if (need <= free) return {0.0, "fits now"};
    // Known ends first, soonest first; unknown ones last.
    std::stable_sort(holders.begin(), holders.end(), [](const HolderEnd& a, const HolderEnd& b) {
        if (a.ends_in_s.has_value() != b.ends_in_s.has_value()) return a.ends_in_s.has_value();
        return a.ends_in_s.value_or(0) < b.ends_in_s.value_or(0);
    });
    std::uint64_t room = free;
    std::vector<std::string> used;
    for (const auto& h : holders) {
        if (!h.ends_in_s)
            return {std::nullopt,
                    fmt::format("unknown: it needs {} from {}, and when that ends is not measured ({})",
                                human_bytes(need - room), h.name, h.why)};
        room += h.bytes;
        used.push_back(fmt::format("{} ({})", h.name, h.why));
        if (room >= need)
            return {*h.ends_in_s,
                    fmt::format("once {} end{}", fmt::join(used, ", "), used.size() == 1 ? "s" : "")};
    }
    return {std::nullopt,
            "unknown: the holders loch knows of do not free enough (other programs hold the rest)"};
}

}  // namespace loch::broker
