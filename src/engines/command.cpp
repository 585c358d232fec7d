#include "engines/command.hpp"

#include <stdexcept>

namespace loch::engines {

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
        if (c == '}') throw std::invalid_argument("unmatched '}' in '" + std::string(t) + "'");
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
            throw std::invalid_argument("unknown placeholder {" + name + "} in '" + std::string(t) + "'");
        out += it->second;
        i = close;
    }
    return out;
}

std::vector<std::string> command_argv(const config::ModelConfig& model, const LaunchOptions& launch) {
    if (!model.command) throw std::invalid_argument("model '" + model.name + "' has no command template");
    const std::map<std::string, std::string> values{
        {"host", launch.host},
        {"port", std::to_string(launch.port)},
        {"model_path", model.path.string()},
        {"model_name", model.name},
        {"ctx", std::to_string(model.args.ctx)},
        {"parallel", std::to_string(model.args.parallel)},
    };
    std::vector<std::string> argv;
    for (const auto& t : model.command->argv) argv.push_back(expand_placeholders(t, values));
    if (argv.empty()) throw std::invalid_argument("model '" + model.name + "': empty command argv");
    return argv;
}

}  // namespace loch::engines
