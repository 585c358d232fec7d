// devices/page_cache — model files in the kernel's page cache: how much of a file is resident (mincore over
// a read-only mapping that touches no page), and reading a file ahead into it.
//
// Page cache is memory the kernel gives back under pressure (MemAvailable counts it as available), so loch
// never books it; but on a unified-memory APU it is the very memory the GPU allocates from, and a model
// whose file is resident starts at memory speed instead of disk speed — which is why loch measures it and
// shows it (broker/file_cache.hpp). Both calls block on the disk: run them on a worker, never on the loop.
#pragma once

#include <cstdint>
#include <filesystem>
#include <functional>

namespace loch::devices {

struct FileResidency {
    std::uint64_t bytes = 0;   // the file's size
    std::uint64_t cached = 0;  // of it, resident in the page cache
};

// {0, 0} when the file cannot be opened or mapped.
FileResidency resident(const std::filesystem::path& file);

// Reads the file into the page cache from the start, in chunks, for as long as `keep_going()` says so
// (asked before each chunk). Returns the bytes read.
std::uint64_t read_ahead(const std::filesystem::path& file, const std::function<bool()>& keep_going);

}  // namespace loch::devices
