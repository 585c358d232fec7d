// config/walker — the generic half of loading YAML: a keyed walk over each mapping (unknown keys with a
// "did you mean", duplicates), typed and range-checked scalars (text, integers, booleans, sizes, durations,
// lists, choices), paths relative to the file, and diagnostics with file:line:column. Every conversion
// returns nullopt after recording its error, so that one load reports every problem at once.
//
// loch's own schema (config/loader.cpp) is written on it, and so are the engine kinds' sections (sd:, audio:,
// vllm:).
#pragma once

#include <yaml-cpp/yaml.h>

#include <cctype>
#include <cstdint>
#include <filesystem>
#include <functional>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "config/config.hpp"
#include "core/text.hpp"

namespace loch::config {

// Small text helpers for messages.
std::size_t edit_distance(std::string_view a, std::string_view b);
std::string quoted_list(const std::vector<std::string>& xs);
using core::ascii_lower;  // (core/text.hpp: header-only, for the fuzz targets that link config files alone)

class Walker {
  public:
    // `file` names the source in diagnostics; `home` expands "~/" in paths (empty: no expansion).
    Walker(std::string file, fs::path home) : file_(std::move(file)), home_(std::move(home)) {}

    std::vector<Diagnostic> diags;

    void error(const YAML::Node& at, const std::string& key, std::string message);
    void error_at(int line, const std::string& key, std::string message);

    using Handler =
        std::function<void(const YAML::Node& key, const YAML::Node& value, const std::string& path)>;
    using Keys = std::vector<std::pair<std::string, Handler>>;
    // Walks a mapping: every key must be one of `handlers`, at most once; each is handed its value and
    // dotted path ("models[2].args.ctx").
    void walk(const YAML::Node& map, const std::string& path, const Keys& handlers);

    // "nothing", "a list", "a mapping" or the quoted scalar: for messages.
    static std::string describe(const YAML::Node& n);

    std::optional<std::string> str(const YAML::Node& v, const std::string& key, bool allow_empty = false);
    std::optional<std::int64_t> integer(const YAML::Node& v, const std::string& key, std::int64_t lo,
                                        std::int64_t hi);
    std::optional<double> number(const YAML::Node& v, const std::string& key, double lo, double hi);
    std::optional<bool> boolean(const YAML::Node& v, const std::string& key);
    std::optional<std::uint64_t> size(const YAML::Node& v, const std::string& key, std::uint64_t lo = 0);
    std::optional<Seconds> duration(const YAML::Node& v, const std::string& key, Seconds lo = Seconds{0});
    std::optional<std::vector<std::string>> str_list(const YAML::Node& v, const std::string& key);
    // The common row "key: an integer in [lo, hi]", stored into `out` (a number or an optional one).
    template <class T>
    Handler integer_into(T& out, std::int64_t lo, std::int64_t hi) {
        return [this, &out, lo, hi](const YAML::Node&, const YAML::Node& v, const std::string& k) {
            if (auto x = integer(v, k, lo, hi)) out = static_cast<T>(*x);
        };
    }
    template <class T>
    std::optional<T> choice(const YAML::Node& v, const std::string& key,
                            const std::vector<std::pair<std::string, T>>& options) {
        if (v.IsScalar()) {
            const std::string s = ascii_lower(v.Scalar());
            for (const auto& [name, val] : options) {
                if (s == name) return val;
            }
        }
        std::vector<std::string> names;
        for (const auto& o : options) names.push_back(o.first);
        error(v, key, "expected one of " + quoted_list(names) + ", got " + describe(v));
        return std::nullopt;
    }

    // `p` against `base` ("~/" = home), normalized.
    fs::path resolve(const fs::path& base, const std::string& p) const;

    const std::string& file() const { return file_; }

  private:
    std::string file_;
    fs::path home_;
};

}  // namespace loch::config
