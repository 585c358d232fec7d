#include "config/placeholders.hpp"

#include <stdexcept>

namespace loch::config {

const std::vector<std::string>& command_placeholders() {
    static const std::vector<std::string> names{"host",       "port", "model_path",
                                                "model_name", "ctx",  "parallel"};
    return names;
}

std::string expand_placeholders(std::string_view t, const std::map<std::string, std::string>& values) {
    std::string out;
    for (std::size_t i = 0; i < t.size(); ++i) {
        const char c = t[i];
        if ((c == '{' || c == '}') && i + 1 < t.size() && t[i + 1] == c) {
            out += c;
            ++i;
            continue;
        }
        if (c == '}')
            throw std::invalid_argument("unmatched '}' in '" + std::string(t) +
                                        "' (write '}}' for a literal brace)");
        if (c != '{') {
            out += c;
            continue;
        }
        const auto close = t.find('}', i);
        if (close == std::string_view::npos)
            throw std::invalid_argument("unclosed '{' in '" + std::string(t) + "'");
        const std::string name(t.substr(i + 1, close - i - 1));
        const auto it = values.find(name);
        if (it == values.end())
            throw std::invalid_argument("unknown placeholder {" + name + "} in '" + std::string(t) +
                                        "' (known: {" +
                                        [] {
                                            std::string k;
                                            for (const auto& n : command_placeholders())
                                                k += (k.empty() ? "" : "} {") + n;
                                            return k;
                                        }() +
                                        "})");
        out += it->second;
        i = close;
    }
    return out;
}

}  // namespace loch::config
