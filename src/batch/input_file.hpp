// batch/input_file — checks a Batch API input file (JSONL, one request per line:
// {"custom_id", "method": "POST", "url", "body": {"model", …}}) before anything of it runs, and finds each
// item's line in it. Read line by line from a stream: a 5 GB captioning file is never held in memory.
//
// Every problem is reported with its 1-based line number, up to `max_problems` of them (then "and N more"):
// bad JSON, a line that is not an object, a missing or ill-typed field, a method other than POST, a URL loch
// does not serve in a batch, a model the caller does not know, a duplicate custom_id (naming the line that
// had it first), an empty file. Blank lines are allowed (editors add a final newline) and skipped.
#pragma once

#include <cstdint>
#include <functional>
#include <istream>
#include <optional>
#include <string>
#include <vector>

#include "batch/store.hpp"

namespace loch::batch {

struct InputRules {
    // Why `url` cannot be a batch item's (nullopt: it can), e.g. "loch serves no /v1/foo".
    std::function<std::optional<std::string>(const std::string& url)> url_problem;
    // Why `model` cannot serve it (nullopt: it can), e.g. "no model named 'x' (known: a, b)".
    std::function<std::optional<std::string>(const std::string& model)> model_problem;
    std::size_t max_problems = 20;
    std::uint64_t max_line_bytes = 64 * 1024 * 1024;  // one request (an image as a data URL is large)
};

struct InputProblem {
    std::int64_t line = 0;  // 1-based; 0 for the file as a whole
    std::string message;
};

struct InputCheck {
    std::vector<ItemRecord> items;  // line, custom_id, url, model, line_offset, line_bytes
    std::vector<InputProblem> problems;
    std::size_t more_problems = 0;  // found beyond max_problems
    bool ok() const { return problems.empty(); }
    // "line 3: bad JSON …; line 7: …" (and "and 12 more"), for an error message.
    std::string summary() const;
};

InputCheck check_input_file(std::istream& in, const InputRules& rules);

}  // namespace loch::batch
