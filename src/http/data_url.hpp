// http/data_url — an image sent inline in a chat message (`image_url: {url: "data:image/png;base64,…"}`, as
// OpenAI's clients send it): its format and pixel size from its header, read before anything starts, so
// that a vision model's request is costed by its image and a bad image is a 400 that says what is wrong.
// Only data URLs: loch's engines never fetch from the network. PNG and JPEG only: the formats both OpenAI's
// API and the engine's decoder (stb_image) read and whose size loch can read from the header. The base64
// is decoded by Boost (archive iterators), only as far as the header needs.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

namespace loch::http {

struct InlineImage {
    std::string format;       // "png" | "jpeg"
    std::uint64_t bytes = 0;  // the decoded file's size
    std::uint32_t width = 0, height = 0;
};

// Throws broker::Error(invalid_request) naming `where` ("messages[0].content[1].image_url") and the reason.
InlineImage read_image_url(std::string_view url, std::string_view where);

}  // namespace loch::http
