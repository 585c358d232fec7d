#include "core/file_identity.hpp"

#include <fmt/format.h>

namespace loch {

std::string file_identity(const std::filesystem::path& p) {
    std::error_code ec;
    if (!std::filesystem::is_regular_file(p, ec)) return {};
    const auto size = std::filesystem::file_size(p, ec);
    const auto mtime = std::filesystem::last_write_time(p, ec);
    return fmt::format("{}|{}|{}", p.string(), ec ? 0 : size, ec ? 0 : mtime.time_since_epoch().count());
}

}  // namespace loch
