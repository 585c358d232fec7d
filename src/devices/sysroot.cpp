#include "devices/sysroot.hpp"

#include <algorithm>
#include <cerrno>
#include <charconv>
#include <cstring>
#include <fstream>
#include <sstream>
#include <system_error>

namespace loch::devices {

namespace {
constexpr std::size_t kMaxFile = 4u << 20;  // sysfs/proc text files are tiny; cap protects against /dev/zero
}

Sysroot::Sysroot(std::filesystem::path root)
    : root_(root.empty() ? std::filesystem::path("/") : std::move(root)) {}

bool Sysroot::is_live() const {
    std::error_code ec;
    return std::filesystem::equivalent(root_, "/", ec);
}

std::filesystem::path Sysroot::resolve(std::string_view abs_path) const {
    std::string_view rel = abs_path;
    while (!rel.empty() && rel.front() == '/') rel.remove_prefix(1);
    return root_ / std::filesystem::path(rel);
}

Probed<std::string> Sysroot::read(std::string_view abs_path) const {
    const auto p = resolve(abs_path);
    const std::string name(abs_path);
    std::ifstream in(p, std::ios::binary);
    if (!in) {
        const int err = errno;
        std::error_code ec;
        if (!std::filesystem::exists(p, ec)) return Probed<std::string>::unknown(name + ": missing");
        return Probed<std::string>::unknown(name + ": unreadable (" + std::strerror(err) + ")");
    }
    std::string text;
    char buf[8192];
    while (in && text.size() < kMaxFile) {
        in.read(buf, sizeof buf);
        text.append(buf, static_cast<std::size_t>(in.gcount()));
    }
    if (in.bad()) return Probed<std::string>::unknown(name + ": read error");
    return Probed<std::string>::known(std::move(text), name);
}

Probed<std::string> Sysroot::read_line(std::string_view abs_path) const {
    auto r = read(abs_path);
    if (!r) return r;
    const auto& t = *r.value;
    const auto nl = t.find('\n');
    std::string line = trim(std::string_view(t).substr(0, nl));
    if (line.empty()) return Probed<std::string>::unknown(std::string(abs_path) + ": empty");
    return Probed<std::string>::known(std::move(line), std::string(abs_path));
}

Probed<std::uint64_t> Sysroot::read_u64(std::string_view abs_path) const {
    auto line = read_line(abs_path);
    if (!line) return Probed<std::uint64_t>::unknown(line.detail);
    const std::string& s = *line.value;
    const auto token = s.substr(0, s.find_first_of(" \t"));
    auto v = parse_u64(token);
    if (!v)
        return Probed<std::uint64_t>::unknown(std::string(abs_path) + ": not a number: \"" + s.substr(0, 40) +
                                              "\"");
    return Probed<std::uint64_t>::known(*v, std::string(abs_path));
}

std::vector<std::string> Sysroot::list(std::string_view abs_dir) const {
    std::vector<std::string> names;
    std::error_code ec;
    std::filesystem::directory_iterator it(resolve(abs_dir), ec), end;
    for (; !ec && it != end; it.increment(ec)) names.push_back(it->path().filename().string());
    std::sort(names.begin(), names.end());
    return names;
}

std::optional<std::vector<std::string>> Sysroot::try_list(std::string_view abs_dir) const {
    std::vector<std::string> names;
    std::error_code ec;
    std::filesystem::directory_iterator it(resolve(abs_dir), ec), end;
    if (ec) return std::nullopt;
    for (; !ec && it != end; it.increment(ec)) names.push_back(it->path().filename().string());
    if (ec) return std::nullopt;
    std::sort(names.begin(), names.end());
    return names;
}

bool Sysroot::exists(std::string_view abs_path) const {
    std::error_code ec;
    return std::filesystem::exists(resolve(abs_path), ec);
}

std::string trim(std::string_view s) {
    const auto* ws = " \t\r\n";
    const auto b = s.find_first_not_of(ws);
    if (b == std::string_view::npos) return {};
    const auto e = s.find_last_not_of(ws);
    return std::string(s.substr(b, e - b + 1));
}

std::optional<std::uint64_t> parse_u64(std::string_view s) {
    int base = 10;
    if (s.size() > 2 && s[0] == '0' && (s[1] == 'x' || s[1] == 'X')) {
        base = 16;
        s.remove_prefix(2);
    }
    if (s.empty()) return std::nullopt;
    std::uint64_t v = 0;
    const auto [ptr, ec] = std::from_chars(s.data(), s.data() + s.size(), v, base);
    if (ec != std::errc{} || ptr != s.data() + s.size()) return std::nullopt;
    return v;
}

std::optional<std::int64_t> parse_i64(std::string_view s) {
    if (s.empty()) return std::nullopt;
    std::int64_t v = 0;
    const auto [ptr, ec] = std::from_chars(s.data(), s.data() + s.size(), v);
    if (ec != std::errc{} || ptr != s.data() + s.size()) return std::nullopt;
    return v;
}

std::map<std::string, std::string> parse_key_values(std::string_view text, char separator) {
    std::map<std::string, std::string> kv;
    std::istringstream in{std::string(text)};
    std::string line;
    while (std::getline(in, line)) {
        std::size_t pos = separator == ' ' ? line.find_first_of(" \t") : line.find(separator);
        if (pos == std::string::npos) continue;
        auto key = trim(std::string_view(line).substr(0, pos));
        if (key.empty()) continue;
        kv.emplace(std::move(key), trim(std::string_view(line).substr(pos + 1)));
    }
    return kv;
}

}  // namespace loch::devices
