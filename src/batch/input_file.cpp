#include "batch/input_file.hpp"
#include "core/json_text.hpp"

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include <unordered_map>

namespace loch::batch {

namespace {

// A JSON value as it may be quoted in a message: short, and never throwing on bad UTF-8.
std::string shown(const nlohmann::json& v) {
    std::string s = core::json_text(v);
    if (s.size() > 60) s = s.substr(0, 57) + "...";
    return s;
}

class Checker {
  public:
    explicit Checker(const InputRules& rules) : rules_(rules) {}

    void line(std::int64_t n, std::uint64_t offset, const std::string& text) {
        if (text.find_first_not_of(" \t\r") == std::string::npos) return;  // blank
        const auto j = nlohmann::json::parse(text, nullptr, false);
        if (j.is_discarded()) return problem(n, "not valid JSON");
        if (!j.is_object()) return problem(n, "not a JSON object: " + shown(j));
        const auto text_field = [&](const char* key) -> std::optional<std::string> {
            const auto it = j.find(key);
            if (it == j.end()) return problem(n, fmt::format("no \"{}\"", key)), std::nullopt;
            if (!it->is_string() || it->get_ref<const std::string&>().empty())
                return problem(n, fmt::format("\"{}\" must be a non-empty string, got {}", key, shown(*it))),
                       std::nullopt;
            return it->get<std::string>();
        };
        const auto custom_id = text_field("custom_id");
        const auto method = text_field("method");
        const auto url = text_field("url");
        if (!custom_id || !method || !url) return;
        if (*method != "POST") return problem(n, fmt::format("method must be \"POST\", got \"{}\"", *method));
        if (auto why = rules_.url_problem ? rules_.url_problem(*url) : std::nullopt) return problem(n, *why);
        const auto body = j.find("body");
        if (body == j.end() || !body->is_object()) return problem(n, "\"body\" must be a JSON object");
        const auto model = body->find("model");
        if (model == body->end() || !model->is_string())
            return problem(n, "\"body\" has no \"model\" (each request names its model)");
        const std::string model_name = model->get<std::string>();
        if (auto why = rules_.model_problem ? rules_.model_problem(model_name) : std::nullopt)
            return problem(n, *why);
        const auto [first, fresh] = seen_.emplace(*custom_id, n);
        if (!fresh)
            return problem(
                n, fmt::format("custom_id \"{}\" is already used on line {}", *custom_id, first->second));
        ItemRecord item;
        item.line = n;
        item.custom_id = *custom_id;
        item.url = *url;
        item.model = model_name;
        item.line_offset = offset;
        item.line_bytes = text.size();
        out_.items.push_back(std::move(item));
    }

    InputCheck finish() {
        if (out_.items.empty() && out_.problems.empty())
            out_.problems.push_back({0, "the file has no requests"});
        if (!out_.problems.empty()) out_.items.clear();  // nothing of a bad file runs
        return std::move(out_);
    }

    void problem(std::int64_t n, std::string message) {
        if (out_.problems.size() < rules_.max_problems)
            out_.problems.push_back({n, std::move(message)});
        else
            ++out_.more_problems;
    }

  private:
    const InputRules& rules_;
    std::unordered_map<std::string, std::int64_t> seen_;  // custom_id → its first line
    InputCheck out_;
};

}  // namespace

std::string InputCheck::summary() const {
    std::string out;
    for (const auto& p : problems) {
        if (!out.empty()) out += "; ";
        out += p.line > 0 ? fmt::format("line {}: {}", p.line, p.message) : p.message;
    }
    if (more_problems) out += fmt::format("; and {} more", more_problems);
    return out;
}

InputCheck check_input_file(std::istream& in, const InputRules& rules) {
    Checker check(rules);
    std::string text;
    std::uint64_t offset = 0;
    std::int64_t n = 0;
    auto* buf = in.rdbuf();
    // Line by line, never more than max_line_bytes of one line in memory (a hostile file may be one line).
    for (bool more = buf != nullptr; more;) {
        text.clear();
        std::uint64_t length = 0;
        int c = 0;
        while ((c = buf->sbumpc()) != std::char_traits<char>::eof() && c != '\n') {
            if (length++ < rules.max_line_bytes) text.push_back(static_cast<char>(c));
        }
        more = c != std::char_traits<char>::eof();
        if (!more && length == 0) break;  // the file ended with a newline (or is empty)
        ++n;
        if (length > rules.max_line_bytes)
            check.problem(n, fmt::format("the line is {} bytes, over the {} a request may have", length,
                                         rules.max_line_bytes));
        else
            check.line(n, offset, text);
        offset += length + (more ? 1 : 0);
    }
    return check.finish();
}

}  // namespace loch::batch
