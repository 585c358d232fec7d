#include "balancer/agent_answer.hpp"

#include <algorithm>
#include <cmath>

#include <fmt/format.h>

namespace loch::balancer {

namespace {

// A reason HAProxy can show: one line, printable, short.
std::string reason(std::string_view text) {
    std::string out;
    for (const char c : text.substr(0, 200)) out += (c >= 0x20 && c < 0x7f) ? c : ' ';
    return out;
}

int percent(double x) {
    return std::clamp(static_cast<int>(std::lround(x)), 1, 100);
}

}  // namespace

std::optional<AgentQuestion> parse_agent_question(std::string_view line) {
    while (!line.empty() && (line.back() == '\r' || line.back() == '\n')) line.remove_suffix(1);
    AgentQuestion q;
    std::size_t i = 0;
    while (i < line.size()) {
        while (i < line.size() && (line[i] == ' ' || line[i] == '\t')) ++i;
        std::size_t j = i;
        while (j < line.size() && line[j] != ' ' && line[j] != '\t') ++j;
        if (j == i) break;
        const std::string_view word = line.substr(i, j - i);
        if (q.model.empty())
            q.model = std::string(word);
        else if (word == "resident")
            q.resident_tier = true;
        else if (word.starts_with("key="))
            q.key = std::string(word.substr(4));
        else
            return std::nullopt;
        i = j;
    }
    if (q.model.empty()) return std::nullopt;
    return q;
}

std::string agent_answer(const broker::Outlook& o, bool resident_tier) {
    using Fit = broker::Outlook::Fit;
    if (o.fit == Fit::unknown_model) return "down #unknown model\n";
    const std::uint64_t maxconn = std::uint64_t{std::max(o.slots, 1u)} + o.queue_limit;
    const bool queue_full = o.queue_limit > 0 && o.queued >= o.queue_limit;
    if (o.fit == Fit::never) return fmt::format("down #never fits here: {}\n", reason(o.why));
    if (resident_tier && o.fit != Fit::resident) return "drain #not resident here\n";
    if (queue_full)
        return fmt::format("drain maxconn:{} #queue full: {} waiting (limit {})\n", maxconn, o.queued,
                           o.queue_limit);
    int weight = 1;
    std::string why;
    switch (o.fit) {
        case Fit::resident: {
            if (o.active < o.slots) {
                weight = 100;
                why = fmt::format("resident, {} of {} slots free", o.slots - o.active, o.slots);
            } else {
                const double left = o.queue_limit ? 1.0 - double(o.queued) / double(o.queue_limit) : 0.0;
                weight = percent(50.0 * left);
                why = fmt::format("resident, slots busy, {} waiting", o.queued);
            }
            break;
        }
        case Fit::fits_now:
            weight = percent(11.0 + 39.0 * o.free_share_after);  // above any box that must evict
            why = fmt::format("fits now, {:.0f}% of memory left after", 100.0 * o.free_share_after);
            break;
        case Fit::fits_evicting:
            weight = percent(1.0 + 9.0 * o.free_share_after);
            why = "fits after evicting idle models";
            break;
        case Fit::fits_later:
            why = "fits when busy work ends: " + reason(o.why);
            break;
        case Fit::planning:
            why = "estimating its memory";
            break;
        default:
            break;
    }
    return fmt::format("ready up {}% maxconn:{} #{}\n", weight, maxconn, why);
}

}  // namespace loch::balancer
