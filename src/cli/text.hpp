// cli/text — how the commands print JSON and sizes (shared by `loch plan`, `loch plan --image`, `loch
// inspect`).
#pragma once

#include <cstdint>
#include <string>

#include <fmt/format.h>
#include <nlohmann/json.hpp>
#include "core/json_text.hpp"

namespace loch::cli {

// Indented JSON. Metadata strings are outside input and need not be UTF-8: replace what is not, never throw.
inline std::string pretty_json(const nlohmann::json& j) {
    return core::json_text(j, 2);
}

// "1536.0": bytes in MiB with one decimal, for tables whose column says MiB.
inline std::string mib_text(std::uint64_t bytes) {
    return fmt::format("{:.1f}", static_cast<double>(bytes) / (1024.0 * 1024.0));
}

}  // namespace loch::cli
