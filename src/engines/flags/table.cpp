#include "engines/flags/table.hpp"

#include <algorithm>
#include <cctype>
#include <regex>

namespace loch::engines::flags {

std::string_view to_string(FlagClass c) {
    switch (c) {
        case FlagClass::planned:
            return "planned";
        case FlagClass::neutral:
            return "memory-neutral";
        case FlagClass::refused:
            return "refused";
        case FlagClass::loch:
            return "set by loch";
    }
    return "refused";
}

const FlagRule* FlagTable::find(std::string_view name) const {
    std::string key(name);
    if (underscores_are_hyphens && key.starts_with("--")) std::replace(key.begin(), key.end(), '_', '-');
    for (const auto& r : rules)
        if (std::find(r.names.begin(), r.names.end(), key) != r.names.end()) return &r;
    return nullptr;
}

std::variant<std::vector<ExtraFlag>, std::string> read_extra(const FlagTable& table,
                                                             const std::vector<std::string>& extra) {
    std::vector<ExtraFlag> out;
    const std::string engine(table.engine);
    for (std::size_t i = 0; i < extra.size(); ++i) {
        const std::string& arg = extra[i];
        if (arg.empty() || arg[0] != '-' || arg == "-" || arg == "--")
            return "'" + arg + "' is not a flag of " + engine +
                   " (each entry of extra is a flag or the value right after the flag that takes it)";
        const auto eq = arg.find('=');
        const std::string name = table.equals_form ? arg.substr(0, eq) : arg;
        const FlagRule* rule = table.find(name);
        // `--flag=value` to an engine that reads only `--flag value`: say which, after what the flag is.
        const FlagRule* before_eq = !rule && !table.equals_form && eq != std::string::npos
                                        ? table.find(std::string_view(arg).substr(0, eq))
                                        : nullptr;
        const std::string said = before_eq ? arg.substr(0, eq) : name;
        const FlagRule* known = rule ? rule : before_eq;
        if (!known)
            return "'" + name + "' is refused: loch does not know this flag of the pinned " + engine +
                   ", so it cannot tell what it does to memory; a flag loch has not classified is a "
                   "reservation nobody computed (docs/config.md lists what extra takes)";
        if (known->cls == FlagClass::refused) return "'" + said + "' is refused: " + std::string(known->why);
        if (known->cls == FlagClass::loch) return "'" + said + "' is set by loch: " + std::string(known->why);
        if (before_eq)
            return "'" + arg + "': " + engine + " takes a flag's value as the next entry of extra ('" + said +
                   "', '" + arg.substr(eq + 1) + "'), not after '='";
        ExtraFlag f{rule, name, {}};
        if (table.equals_form && eq != std::string::npos) {
            if (rule->values != 1) return "'" + name + "' takes no value after '='";
            f.values.push_back(arg.substr(eq + 1));
        } else {
            for (std::uint8_t v = 0; v < rule->values; ++v) {
                if (i + 1 >= extra.size())
                    return "'" + name + "' needs " + std::to_string(rule->values) + " value(s) after it";
                f.values.push_back(extra[++i]);
            }
        }
        out.push_back(std::move(f));
    }
    return out;
}

std::optional<std::string> refusal(const FlagTable& table, const std::vector<std::string>& extra) {
    auto read = read_extra(table, extra);
    if (auto* why = std::get_if<std::string>(&read)) return std::move(*why);
    return std::nullopt;
}

std::vector<std::string> flag_names_in_help(std::string_view help) {
    // The option column: a line's leading cells (split on runs of two or more spaces) that start with '-';
    // the description after them, and continuation lines (which start with text), name no flags.
    static const std::regex cell_split(R"(\s{2,})");
    static const std::regex flag(R"((^|[\s,])(--?[A-Za-z][A-Za-z0-9_.-]*))");
    std::vector<std::string> names;
    std::size_t start = 0;
    while (start <= help.size()) {
        const auto end = help.find('\n', start);
        std::string line(
            help.substr(start, end == std::string_view::npos ? std::string_view::npos : end - start));
        start = end == std::string_view::npos ? help.size() + 1 : end + 1;
        const auto first = line.find_first_not_of(' ');
        // Option lines start near the margin (llama.cpp at 0, sd.cpp at 2, whisper.cpp at most 13);
        // descriptions continue at the description column (40 and beyond), where a flag named in the text
        // is not an option of its own.
        if (first == std::string::npos || first > 16) continue;
        line = line.substr(first);
        for (std::sregex_token_iterator cell(line.begin(), line.end(), cell_split, -1), stop; cell != stop;
             ++cell) {
            const std::string text = *cell;
            if (text.empty() || text[0] != '-') break;
            for (std::sregex_iterator m(text.begin(), text.end(), flag), none; m != none; ++m) {
                std::string name = (*m)[2];
                while (!name.empty() && !std::isalnum(static_cast<unsigned char>(name.back())))
                    name.pop_back();
                if (std::find(names.begin(), names.end(), name) == names.end()) names.push_back(name);
            }
        }
    }
    return names;
}

}  // namespace loch::engines::flags
