// core/file_identity — what identifies a file for a cache or a saved state: its path, size and modification
// time, as "path|size|mtime". A replaced model file or a rebuilt engine binary gets another identity; the
// dry-run cache and the saved slots both key on it.
#pragma once

#include <filesystem>
#include <string>

namespace loch {

// "" when `p` is not a regular file (missing, a folder).
std::string file_identity(const std::filesystem::path& p);

}  // namespace loch
