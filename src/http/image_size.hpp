// http/image_size — the pixel size of an uploaded PNG or JPEG, from its header (PNG's IHDR, JPEG's SOFn
// marker): what sd-server generates at when an edit names no size. Never reads past the bytes given;
// nullopt for another format or a damaged header.
#pragma once

#include <cstdint>
#include <optional>
#include <string_view>
#include <utility>

namespace loch::http {

std::optional<std::pair<std::uint32_t, std::uint32_t>> image_size(std::string_view bytes);

}  // namespace loch::http
