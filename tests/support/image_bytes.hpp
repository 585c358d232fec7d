// support/image_bytes — the smallest PNG and JPEG byte strings an image's size is read from (the image-size
// and multipart parsers' tests).
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>

namespace loch::test {

inline std::string be32(std::uint32_t v) {
    return {static_cast<char>(v >> 24), static_cast<char>(v >> 16), static_cast<char>(v >> 8),
            static_cast<char>(v)};
}

// A PNG's signature and IHDR (what the size is read from), then filler.
inline std::string png(std::uint32_t w, std::uint32_t h, std::size_t filler = 10) {
    return std::string("\x89PNG\r\n\x1a\n", 8) + be32(13) + "IHDR" + be32(w) + be32(h) +
           std::string("\x08\x02\x00\x00\x00", 5) + be32(0) + std::string(filler, 'x');
}

// A JPEG with an APP1 block of `app1` bytes before its SOF0 marker.
inline std::string jpeg(std::uint16_t w, std::uint16_t h, std::size_t app1 = 16) {
    std::string s("\xff\xd8\xff\xe1", 4);
    s += static_cast<char>((app1 + 2) >> 8);
    s += static_cast<char>((app1 + 2) & 0xff);
    s += std::string(app1, 'e');
    s += std::string("\xff\xc0\x00\x11\x08", 5);
    s += static_cast<char>(h >> 8);
    s += static_cast<char>(h & 0xff);
    s += static_cast<char>(w >> 8);
    s += static_cast<char>(w & 0xff);
    s += std::string(12, '\x01');
    return s;
}

}  // namespace loch::test
