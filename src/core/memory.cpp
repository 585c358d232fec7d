#include "core/memory.hpp"

#include <fmt/format.h>

#include <nlohmann/json.hpp>

namespace loch {

std::string_view to_string(Source s) {
    switch (s) {
        case Source::measured:
            return "measured";
        case Source::engine_dry_run:
            return "engine-dry-run";
        case Source::formula:
            return "formula";
        case Source::configured:
            return "configured";
        case Source::measured_earlier:
            return "measured-earlier";
    }
    return "unknown";
}

std::optional<Source> source_from_string(std::string_view s) {
    for (Source v : {Source::measured, Source::engine_dry_run, Source::formula, Source::configured,
                     Source::measured_earlier}) {
        if (to_string(v) == s) return v;
    }
    return std::nullopt;
}

void to_json(nlohmann::json& j, const MemoryFigure& f) {
    j = nlohmann::json{{"bytes", f.bytes}, {"source", to_string(f.source)}};
    if (!f.detail.empty()) j["detail"] = f.detail;
}

std::string human_bytes(std::uint64_t bytes) {
    const double b = static_cast<double>(bytes);
    if (bytes >= kGiB) return fmt::format("{:.2f} GiB", b / static_cast<double>(kGiB));
    if (bytes >= kMiB) return fmt::format("{:.1f} MiB", b / static_cast<double>(kMiB));
    if (bytes >= 1024) return fmt::format("{:.1f} KiB", b / 1024.0);
    return fmt::format("{} B", bytes);
}

}  // namespace loch
