// engines/image_input — an image a request carries inline (a chat message's data URL), as its header says:
// what a vision model's request is costed by (RequestView::images).
#pragma once

#include <cstdint>

namespace loch::engines {

struct ImageInput {
    std::uint64_t bytes = 0;  // the encoded file
    std::uint32_t width = 0, height = 0;
};

}  // namespace loch::engines
