#include "http/audio_length.hpp"

#include <cstdint>
#include <cstring>

namespace loch::http {

namespace {

std::uint32_t le32(std::string_view s, std::size_t at) {
    std::uint32_t v = 0;
    std::memcpy(&v, s.data() + at, 4);
    return v;  // little-endian hosts only (loch's targets)
}

}  // namespace

std::optional<double> audio_seconds(std::string_view f) {
    if (f.size() < 12 || f.substr(0, 4) != "RIFF" || f.substr(8, 4) != "WAVE") return std::nullopt;
    std::uint32_t byte_rate = 0;
    // Chunks: id (4), size (4), payload padded to even; "fmt " must come before "data".
    for (std::size_t at = 12; at + 8 <= f.size();) {
        const auto id = f.substr(at, 4);
        const std::uint64_t size = le32(f, at + 4);
        if (id == "fmt ") {
            if (size < 16 || at + 8 + 16 > f.size()) return std::nullopt;
            byte_rate = le32(f, at + 8 + 8);
        } else if (id == "data") {
            if (byte_rate == 0) return std::nullopt;
            // A streamed WAV may say 0 or 0xFFFFFFFF: then the data run to the end of the file.
            const std::uint64_t left = f.size() - (at + 8);
            const std::uint64_t bytes = size == 0 || size == 0xFFFFFFFFu || size > left ? left : size;
            return static_cast<double>(bytes) / byte_rate;
        }
        at += 8 + size + (size & 1);
    }
    return std::nullopt;
}

}  // namespace loch::http
