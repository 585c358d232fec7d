#include "http/image_size.hpp"

namespace loch::http {

namespace {

std::uint32_t be(std::string_view b, std::size_t at, int n) {
    std::uint32_t v = 0;
    for (int i = 0; i < n; ++i) v = (v << 8) | static_cast<unsigned char>(b[at + i]);
    return v;
}

}  // namespace

std::optional<std::pair<std::uint32_t, std::uint32_t>> image_size(std::string_view b) {
    // PNG: the 8-byte signature, then IHDR's length, type, width and height (big-endian).
    if (b.size() >= 24 && b.substr(0, 8) == std::string_view("\x89PNG\r\n\x1a\n", 8) &&
        b.substr(12, 4) == "IHDR") {
        const auto w = be(b, 16, 4), h = be(b, 20, 4);
        if (w == 0 || h == 0) return std::nullopt;
        return std::pair{w, h};
    }
    // JPEG: SOI, then segments until a start-of-frame (C0–CF but C4, C8, CC) holding height and width.
    if (b.size() < 4 || static_cast<unsigned char>(b[0]) != 0xFF || static_cast<unsigned char>(b[1]) != 0xD8)
        return std::nullopt;
    std::size_t at = 2;
    while (at + 4 <= b.size()) {
        if (static_cast<unsigned char>(b[at]) != 0xFF) return std::nullopt;
        const unsigned marker = static_cast<unsigned char>(b[at + 1]);
        if (marker == 0xFF) {  // fill byte
            ++at;
            continue;
        }
        if (marker == 0xD8 || (marker >= 0xD0 && marker <= 0xD7) || marker == 0x01) {  // no length
            at += 2;
            continue;
        }
        const std::size_t len = be(b, at + 2, 2);
        if (len < 2) return std::nullopt;
        if (marker >= 0xC0 && marker <= 0xCF && marker != 0xC4 && marker != 0xC8 && marker != 0xCC) {
            if (at + 9 > b.size()) return std::nullopt;
            const auto h = be(b, at + 5, 2), w = be(b, at + 7, 2);
            if (w == 0 || h == 0) return std::nullopt;
            return std::pair{w, h};
        }
        at += 2 + len;
    }
    return std::nullopt;
}

}  // namespace loch::http
