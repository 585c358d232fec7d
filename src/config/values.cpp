// Small value parsers and name rules shared by the loader (sizes, durations, model names, executables).
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <charconv>
#include <cmath>
#include <limits>

#include "config/config.hpp"
#include "config/walker.hpp"

namespace loch::config {

namespace {

void set_why(std::string* why, std::string text) {
    if (why != nullptr) *why = std::move(text);
}

std::string_view trim(std::string_view s) {
    while (!s.empty() && std::isspace(static_cast<unsigned char>(s.front()))) s.remove_prefix(1);
    while (!s.empty() && std::isspace(static_cast<unsigned char>(s.back()))) s.remove_suffix(1);
    return s;
}

bool name_char(char c) {
    return std::isalnum(static_cast<unsigned char>(c)) || c == '.' || c == '_' || c == ':' || c == '+' ||
           c == '-';
}

}  // namespace

std::optional<std::uint64_t> parse_size(std::string_view text, std::string* why) {
    const std::string_view s = trim(text);
    if (s.empty()) {
        set_why(why, "empty size");
        return std::nullopt;
    }
    // Number part: digits with at most one '.', no sign, no exponent.
    std::size_t i = 0;
    bool dot = false;
    while (i < s.size() && (std::isdigit(static_cast<unsigned char>(s[i])) || (s[i] == '.' && !dot))) {
        dot = dot || s[i] == '.';
        ++i;
    }
    const std::string number(s.substr(0, i));
    if (number.empty() || number == ".") {
        set_why(why, "a size starts with a number (bytes, or with a unit: 512MiB, 24GiB, 1.5GB)");
        return std::nullopt;
    }
    const std::string unit = ascii_lower(trim(s.substr(i)));
    struct Unit {
        const char* name;
        std::uint64_t factor;
    };
    static constexpr Unit units[] = {
        {"", 1},
        {"b", 1},
        {"k", 1024},
        {"kb", 1000},
        {"kib", 1024},
        {"m", 1024ull * 1024},
        {"mb", 1000ull * 1000},
        {"mib", 1024ull * 1024},
        {"g", 1024ull * 1024 * 1024},
        {"gb", 1000ull * 1000 * 1000},
        {"gib", 1024ull * 1024 * 1024},
        {"t", 1024ull * 1024 * 1024 * 1024},
        {"tb", 1000ull * 1000 * 1000 * 1000},
        {"tib", 1024ull * 1024 * 1024 * 1024},
    };
    const Unit* found = nullptr;
    for (const auto& u : units) {
        if (unit == u.name) found = &u;
    }
    if (found == nullptr) {
        set_why(why, "unknown size unit '" + std::string(s.substr(i)) +
                         "' (use B, KiB, MiB, GiB, TiB, KB, MB, GB, TB)");
        return std::nullopt;
    }
    if (!dot) {
        std::uint64_t v = 0;
        const auto [p, ec] = std::from_chars(number.data(), number.data() + number.size(), v);
        if (ec != std::errc{} || p != number.data() + number.size() ||
            v > std::numeric_limits<std::uint64_t>::max() / found->factor) {
            set_why(why, "size too large");
            return std::nullopt;
        }
        return v * found->factor;
    }
    double v = 0;
    const auto [p, ec] = std::from_chars(number.data(), number.data() + number.size(), v);
    if (ec != std::errc{} || p != number.data() + number.size()) {
        set_why(why, "not a number: '" + number + "'");
        return std::nullopt;
    }
    const double bytes = std::round(v * static_cast<double>(found->factor));
    if (!(bytes < 1.8e19)) {
        set_why(why, "size too large");
        return std::nullopt;
    }
    return static_cast<std::uint64_t>(bytes);
}

std::optional<Seconds> parse_duration(std::string_view text, std::string* why) {
    const std::string_view s = trim(text);
    if (s.empty()) {
        set_why(why, "empty duration");
        return std::nullopt;
    }
    std::uint64_t total = 0;
    std::size_t i = 0;
    bool any = false;
    while (i < s.size()) {
        std::size_t j = i;
        while (j < s.size() && std::isdigit(static_cast<unsigned char>(s[j]))) ++j;
        if (j == i) {
            set_why(why, "a duration is seconds or number+unit: 90, 90s, 5m, 1h, 1h30m");
            return std::nullopt;
        }
        std::uint64_t v = 0;
        const auto [p, ec] = std::from_chars(s.data() + i, s.data() + j, v);
        if (ec != std::errc{} || v > 100ull * 365 * 24 * 3600) {
            set_why(why, "duration too large");
            return std::nullopt;
        }
        std::uint64_t factor = 1;
        // Spaces may stand between a number and its unit ("5 minutes"), and between parts ("1h 30m").
        while (j < s.size() && s[j] == ' ') ++j;
        if (j < s.size()) {
            std::size_t k = j;
            while (k < s.size() && std::isalpha(static_cast<unsigned char>(s[k]))) ++k;
            const std::string unit = ascii_lower(s.substr(j, k - j));
            // s, m, h, d, and the words people write: sec, secs, second(s), min, mins, minute(s), hr, hrs,
            // hour(s), day(s).
            const auto is = [&](std::initializer_list<std::string_view> names) {
                return std::find(names.begin(), names.end(), unit) != names.end();
            };
            if (is({"s", "sec", "secs", "second", "seconds"}))
                factor = 1;
            else if (is({"m", "min", "mins", "minute", "minutes"}))
                factor = 60;
            else if (is({"h", "hr", "hrs", "hour", "hours"}))
                factor = 3600;
            else if (is({"d", "day", "days"}))
                factor = 86400;
            else {
                set_why(why, "unknown duration unit '" +
                                 std::string(s.substr(j, std::max<std::size_t>(k - j, 1))) +
                                 "' (use s, m, h, d, or seconds, minutes, hours, days)");
                return std::nullopt;
            }
            j = k;
            while (j < s.size() && s[j] == ' ') ++j;
        } else if (any) {
            set_why(why, "a number without unit after another part (write 1h30m, not 1h30)");
            return std::nullopt;
        }
        total += v * factor;
        if (total > 100ull * 365 * 24 * 3600) {
            set_why(why, "duration too large");
            return std::nullopt;
        }
        any = true;
        i = j;
    }
    return Seconds{static_cast<Seconds::rep>(total)};
}

std::optional<std::string> device_id_problem(std::string_view id) {
    const auto digits = [](std::string_view t) {
        return !t.empty() && t.size() <= 4 && std::all_of(t.begin(), t.end(), [](char c) {
            return std::isdigit(static_cast<unsigned char>(c));
        });
    };
    if (id == "cpu") return std::nullopt;
    if (id.starts_with("nvidia:") && digits(id.substr(7))) return std::nullopt;
    if (id.starts_with("amd:card") && digits(id.substr(8))) return std::nullopt;
    if (id.starts_with("vulkan:") && digits(id.substr(7))) return std::nullopt;  // a GPU only Vulkan reports
    std::string hint;
    // What other tools call the same devices.
    for (const std::string_view p : {"cuda:", "cuda", "gpu:", "gpu", "nvidia"})
        if (id.starts_with(p) && digits(id.substr(p.size())))
            hint = " (did you mean nvidia:" + std::string(id.substr(p.size())) + "?)";
    for (const std::string_view p : {"rocm:", "rocm", "hip:", "hip", "amd:", "amd", "card"})
        if (hint.empty() && id.starts_with(p) && digits(id.substr(p.size())))
            hint = " (did you mean amd:card" + std::string(id.substr(p.size())) + "?)";
    return "'" + std::string(id) +
           "' is not a device id: `loch devices` prints them, as cpu, nvidia:N (NVML's order), amd:cardN "
           "(the "
           "DRM card) or vulkan:N (a GPU only Vulkan reports, by its Vulkan index)" +
           hint;
}

bool valid_model_name(std::string_view name) {
    if (name.empty() || name.size() > 128) return false;
    if (!std::isalnum(static_cast<unsigned char>(name.front()))) return false;
    return std::all_of(name.begin(), name.end(), name_char);
}

bool valid_model_alias(std::string_view alias) {
    if (alias.empty() || alias.size() > 128) return false;
    if (alias.front() == '/' || alias.back() == '/') return false;
    if (!std::isalnum(static_cast<unsigned char>(alias.front()))) return false;
    std::size_t start = 0;
    while (start <= alias.size()) {
        const std::size_t end = std::min(alias.find('/', start), alias.size());
        const std::string_view seg = alias.substr(start, end - start);
        if (seg.empty() || seg == "." || seg == "..") return false;
        if (!std::all_of(seg.begin(), seg.end(), name_char)) return false;
        start = end + 1;
    }
    return true;
}

std::string sanitize_model_name(std::string_view stem) {
    std::string out;
    for (char c : stem) {
        const bool ok =
            std::isalnum(static_cast<unsigned char>(c)) || c == '.' || c == '_' || c == '-' || c == '+';
        if (ok)
            out += c;
        else if (out.empty() || out.back() != '-')
            out += '-';
    }
    // Must start with a letter or digit; no trailing separators.
    std::size_t b = 0;
    while (b < out.size() && !std::isalnum(static_cast<unsigned char>(out[b]))) ++b;
    out.erase(0, b);
    while (!out.empty() && (out.back() == '-' || out.back() == '.')) out.pop_back();
    if (out.size() > 128) out.resize(128);
    return out;
}

std::optional<fs::path> find_executable(std::string_view program, const std::vector<fs::path>& dirs) {
    for (const auto& d : dirs) {
        if (d.empty()) continue;
        const fs::path p = d / std::string(program);
        std::error_code ec;
        if (fs::is_regular_file(p, ec) && ::access(p.c_str(), X_OK) == 0) return p;
    }
    return std::nullopt;
}

}  // namespace loch::config
