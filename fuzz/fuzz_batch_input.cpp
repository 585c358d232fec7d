// Fuzzes the Batch API's input-file check (batch/input_file.hpp) with arbitrary bytes as the uploaded file.
// Any outcome but a crash or a leak is a finding, as is an accepted item whose recorded line is not where
// it says (its offset and length must cut out a JSON object with its custom_id) or a custom_id accepted
// twice. fuzz-sources: batch/input_file.cpp
#include <cstddef>
#include <cstdint>
#include <set>
#include <sstream>
#include <string>

#include <nlohmann/json.hpp>

#include "batch/input_file.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
    const std::string file(reinterpret_cast<const char*>(data), size);
    std::istringstream in(file);
    loch::batch::InputRules rules;
    rules.max_line_bytes = 4096;
    rules.url_problem = [](const std::string& url) -> std::optional<std::string> {
        if (url == "/v1/chat/completions" || url == "/v1/embeddings") return std::nullopt;
        return "not served";
    };
    rules.model_problem = [](const std::string& m) -> std::optional<std::string> {
        if (m == "demo") return std::nullopt;
        return "unknown";
    };
    const auto check = loch::batch::check_input_file(in, rules);
    if (!check.ok() && !check.items.empty()) __builtin_trap();
    if (check.problems.size() > rules.max_problems) __builtin_trap();
    std::set<std::string> ids;
    for (const auto& item : check.items) {
        if (item.line_offset + item.line_bytes > file.size()) __builtin_trap();
        const auto j = nlohmann::json::parse(file.substr(item.line_offset, item.line_bytes), nullptr, false);
        if (!j.is_object() || j.value("custom_id", std::string()) != item.custom_id) __builtin_trap();
        if (!ids.insert(item.custom_id).second) __builtin_trap();
    }
    (void)check.summary();
    return 0;
}
