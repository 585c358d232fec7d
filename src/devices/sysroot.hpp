// devices/sysroot — read the files the probes look at (/proc, /sys, /var/lib/dpkg) under a root directory, so
// that tests and `--sysroot DIR` run the same probes on captured trees.
//
// Nothing here throws: a missing, unreadable or malformed file is an error string naming the path and the
// problem, which the probe turns into an unknown figure.
#pragma once

#include <cstdint>
#include <filesystem>
#include <string>
#include <string_view>
#include <vector>

#include "devices/device.hpp"

namespace loch::devices {

class Sysroot {
  public:
    explicit Sysroot(std::filesystem::path root = "/");

    const std::filesystem::path& root() const { return root_; }
    bool is_live() const;  // the root is "/": the running system, not a captured tree
    // "/proc/meminfo" → "<root>/proc/meminfo".
    std::filesystem::path resolve(std::string_view abs_path) const;

    // The whole file (at most 4 MiB); unknown with "PATH: missing" / "PATH: unreadable (...)".
    Probed<std::string> read(std::string_view abs_path) const;
    // The file's first token as an unsigned decimal (or 0x hex) number.
    Probed<std::uint64_t> read_u64(std::string_view abs_path) const;
    // The file's first line, trimmed.
    Probed<std::string> read_line(std::string_view abs_path) const;
    // Entry names of a directory, sorted; empty when it does not exist or cannot be read.
    std::vector<std::string> list(std::string_view abs_dir) const;
    // Like list(), but nullopt when the directory is missing or unreadable (e.g. another user's fdinfo).
    std::optional<std::vector<std::string>> try_list(std::string_view abs_dir) const;
    bool exists(std::string_view abs_path) const;

  private:
    std::filesystem::path root_;
};

// Parsing helpers shared by the probes (exposed for tests).
std::string trim(std::string_view s);
// "123", "0x1a" → value; nullopt for anything else, including overflow and trailing junk.
std::optional<std::uint64_t> parse_u64(std::string_view s);
std::optional<std::int64_t> parse_i64(std::string_view s);
// "Key: value" / "key value" lines → map; later duplicates are ignored.
std::map<std::string, std::string> parse_key_values(std::string_view text, char separator);

}  // namespace loch::devices
