// core/text — small text helpers every module needs alike.
#pragma once

#include <string>
#include <string_view>

namespace loch::core {

// `s` with ASCII letters in lower case (names, units, header fields: never locale-dependent).
inline std::string ascii_lower(std::string_view s) {
    std::string out(s);
    for (auto& c : out)
        if (c >= 'A' && c <= 'Z') c = static_cast<char>(c - 'A' + 'a');
    return out;
}

}  // namespace loch::core
