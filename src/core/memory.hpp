// core/memory — every memory figure in loch is bytes plus where the number came from.
//
// A figure without a source is a guess; the broker, the planner, `loch devices` and the HTTP API all carry
// the source through so that a user can tell a measured number from an estimate.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

#include <nlohmann/json_fwd.hpp>

namespace loch {

enum class Source {
    measured,          // read from the running system: engine log, NVML, sysfs, /proc, cgroup
    engine_dry_run,    // the engine computed it without loading (llama-fit-params)
    formula,           // loch's own arithmetic from the model's shape and settings
    configured,        // a number the user wrote in the config
    measured_earlier,  // the highest measured by an earlier loch for the same model, settings, engine, driver
};

std::string_view to_string(Source s);
std::optional<Source> source_from_string(std::string_view s);

struct MemoryFigure {
    std::uint64_t bytes = 0;
    Source source = Source::formula;
    std::string detail;  // where exactly: "/proc/meminfo MemAvailable", "llama-server log: CUDA0 KV buffer"

    friend bool operator==(const MemoryFigure&, const MemoryFigure&) = default;
};

void to_json(nlohmann::json& j, const MemoryFigure& f);

inline constexpr std::uint64_t kMiB = 1024ull * 1024ull;
inline constexpr std::uint64_t kGiB = 1024ull * kMiB;

// "1.50 GiB", "512.0 MiB", "12 B": for people; JSON always carries exact bytes.
std::string human_bytes(std::uint64_t bytes);

}  // namespace loch
