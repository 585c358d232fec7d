#include "config/walker.hpp"

#include <algorithm>
#include <charconv>
#include <cmath>
#include <set>

#include <fmt/format.h>

namespace loch::config {

std::size_t edit_distance(std::string_view a, std::string_view b) {
    std::vector<std::size_t> prev(b.size() + 1), cur(b.size() + 1);
    for (std::size_t j = 0; j <= b.size(); ++j) prev[j] = j;
    for (std::size_t i = 1; i <= a.size(); ++i) {
        cur[0] = i;
        for (std::size_t j = 1; j <= b.size(); ++j) {
            cur[j] = std::min({prev[j] + 1, cur[j - 1] + 1, prev[j - 1] + (a[i - 1] == b[j - 1] ? 0 : 1)});
        }
        std::swap(prev, cur);
    }
    return prev[b.size()];
}

std::string quoted_list(const std::vector<std::string>& xs) {
    std::string out;
    for (const auto& x : xs) out += (out.empty() ? "" : ", ") + x;
    return out;
}

// Placeholder names used in a template, or an error text.

void Walker::error(const YAML::Node& at, const std::string& key, std::string message) {
    Diagnostic d;
    d.file = file_;
    const YAML::Mark m = at.Mark();
    if (m.line >= 0) {
        d.line = m.line + 1;
        d.column = m.column + 1;
    }
    d.key = key;
    d.message = std::move(message);
    diags.push_back(std::move(d));
}

void Walker::error_at(int line, const std::string& key, std::string message) {
    diags.push_back(Diagnostic{file_, line, 0, key, std::move(message)});
}

void Walker::walk(const YAML::Node& map, const std::string& path,
                  const std::vector<std::pair<std::string, Handler>>& handlers) {
    if (!map.IsMap()) {
        error(map, path, "expected a mapping (key: value lines), got " + describe(map));
        return;
    }
    std::set<std::string> seen;
    for (auto it = map.begin(); it != map.end(); ++it) {
        const YAML::Node k = it->first;
        const YAML::Node v = it->second;
        if (!k.IsScalar()) {
            error(k, path, "keys must be plain words");
            continue;
        }
        const std::string name = k.Scalar();
        const std::string key_path = path.empty() ? name : path + "." + name;
        if (!seen.insert(name).second) {
            error(k, key_path, "duplicate key (each key may appear once)");
            continue;
        }
        const auto h =
            std::find_if(handlers.begin(), handlers.end(), [&](const auto& p) { return p.first == name; });
        if (h == handlers.end()) {
            std::vector<std::string> known;
            std::string best;
            std::size_t best_d = 3;
            for (const auto& p : handlers) {
                known.push_back(p.first);
                const auto d = edit_distance(ascii_lower(name), p.first);
                if (d < best_d) {
                    best_d = d;
                    best = p.first;
                }
            }
            std::string msg = "unknown key '" + name + "'";
            if (!best.empty()) msg += " (did you mean '" + best + "'?)";
            msg += "; known keys here: " + quoted_list(known);
            error(k, key_path, std::move(msg));
            continue;
        }
        h->second(k, v, key_path);
    }
}

std::string Walker::describe(const YAML::Node& n) {
    if (!n.IsDefined() || n.IsNull()) return "nothing";
    if (n.IsSequence()) return "a list";
    if (n.IsMap()) return "a mapping";
    return "'" + n.Scalar() + "'";
}

std::optional<std::string> Walker::str(const YAML::Node& v, const std::string& key, bool allow_empty) {
    if (!v.IsScalar()) {
        error(v, key, "expected a text value, got " + describe(v));
        return std::nullopt;
    }
    if (!allow_empty && v.Scalar().empty()) {
        error(v, key, "must not be empty");
        return std::nullopt;
    }
    return v.Scalar();
}

std::optional<std::int64_t> Walker::integer(const YAML::Node& v, const std::string& key, std::int64_t lo,
                                            std::int64_t hi) {
    if (!v.IsScalar()) {
        error(v, key, "expected an integer, got " + describe(v));
        return std::nullopt;
    }
    const std::string& s = v.Scalar();
    std::int64_t x = 0;
    const auto [p, ec] = std::from_chars(s.data(), s.data() + s.size(), x);
    if (s.empty() || ec != std::errc{} || p != s.data() + s.size()) {
        error(v, key, "expected an integer, got '" + s + "'");
        return std::nullopt;
    }
    if (x < lo || x > hi) {
        error(v, key, "must be between " + std::to_string(lo) + " and " + std::to_string(hi) + ", got " + s);
        return std::nullopt;
    }
    return x;
}

std::optional<double> Walker::number(const YAML::Node& v, const std::string& key, double lo, double hi) {
    if (!v.IsScalar()) {
        error(v, key, "expected a number, got " + describe(v));
        return std::nullopt;
    }
    const std::string& s = v.Scalar();
    double x = 0;
    const auto [p, ec] = std::from_chars(s.data(), s.data() + s.size(), x);
    if (s.empty() || ec != std::errc{} || p != s.data() + s.size() || !std::isfinite(x)) {
        error(v, key, "expected a number, got '" + s + "'");
        return std::nullopt;
    }
    if (x < lo || x > hi) {
        error(v, key, fmt::format("must be between {} and {}, got {}", lo, hi, s));
        return std::nullopt;
    }
    return x;
}

std::optional<bool> Walker::boolean(const YAML::Node& v, const std::string& key) {
    if (v.IsScalar()) {
        const std::string s = ascii_lower(v.Scalar());
        if (s == "true" || s == "yes" || s == "on") return true;
        if (s == "false" || s == "no" || s == "off") return false;
    }
    error(v, key, "expected true or false, got " + describe(v));
    return std::nullopt;
}

std::optional<std::uint64_t> Walker::size(const YAML::Node& v, const std::string& key, std::uint64_t lo) {
    if (!v.IsScalar()) {
        error(v, key, "expected a size (bytes, or 512MiB / 24GiB / 1.5GB), got " + describe(v));
        return std::nullopt;
    }
    std::string why;
    const auto b = parse_size(v.Scalar(), &why);
    if (!b) {
        error(v, key, "bad size '" + v.Scalar() + "': " + why);
        return std::nullopt;
    }
    if (*b < lo) {
        error(v, key, "must be at least " + std::to_string(lo) + " bytes, got '" + v.Scalar() + "'");
        return std::nullopt;
    }
    return b;
}

std::optional<Seconds> Walker::duration(const YAML::Node& v, const std::string& key, Seconds lo) {
    if (!v.IsScalar()) {
        error(v, key, "expected a duration (seconds, or 90s / 5m / 1h), got " + describe(v));
        return std::nullopt;
    }
    std::string why;
    const auto d = parse_duration(v.Scalar(), &why);
    if (!d) {
        error(v, key, "bad duration '" + v.Scalar() + "': " + why);
        return std::nullopt;
    }
    if (*d < lo) {
        error(v, key, "must be at least " + std::to_string(lo.count()) + " s, got '" + v.Scalar() + "'");
        return std::nullopt;
    }
    return d;
}

std::optional<std::vector<std::string>> Walker::str_list(const YAML::Node& v, const std::string& key) {
    if (!v.IsSequence()) {
        error(v, key, "expected a list ([a, b] or '- a' lines), got " + describe(v));
        return std::nullopt;
    }
    std::vector<std::string> out;
    bool ok = true;
    for (std::size_t i = 0; i < v.size(); ++i) {
        const auto s = str(v[i], key + "[" + std::to_string(i) + "]");
        if (s)
            out.push_back(*s);
        else
            ok = false;
    }
    if (!ok) return std::nullopt;
    return out;
}

fs::path Walker::resolve(const fs::path& base, const std::string& p) const {
    fs::path out(p);
    if (!p.empty() && p[0] == '~') {
        // "~/x": only the current user's home, never "~other".
        if (p == "~" || p.rfind("~/", 0) == 0) {
            if (!home_.empty()) out = home_ / p.substr(p.size() > 1 ? 2 : 1);
        }
    }
    if (out.is_relative()) out = base / out;
    return out.lexically_normal();
}

}  // namespace loch::config
