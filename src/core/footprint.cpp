#include "core/footprint.hpp"

#include <fmt/format.h>

namespace loch {

MemoryFigure largest_of(const std::vector<Candidate>& candidates) {
    MemoryFigure best;
    std::string all;
    const Candidate* winner = nullptr;
    for (const auto& c : candidates) {
        all += fmt::format("{}{} {} ({})", all.empty() ? "" : "; ", c.what, human_bytes(c.figure.bytes),
                           to_string(c.figure.source));
        if (!winner || c.figure.bytes > winner->figure.bytes) winner = &c;
    }
    if (!winner) return best;
    best.bytes = winner->figure.bytes;
    best.source = winner->figure.source;
    // The winner's own breakdown ("weights … + KV … + projector …") is what a person reads next.
    best.detail = "largest of: " + all + " → " + winner->what +
                  (winner->figure.detail.empty() ? "" : ": " + winner->figure.detail);
    return best;
}

}  // namespace loch
