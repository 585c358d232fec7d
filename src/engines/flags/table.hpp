// engines/flags — every command-line flag of an engine, classified, so that `args.extra` (a model's flags
// passed through to its engine) never carries a memory change loch did not plan.
//
// Each engine kind has one table (flags/<engine>.cpp) that lists every flag of the pinned engine with one
// class and a line of why:
//   planned   the planner computes what it changes (the kind reads it from `extra` into its settings);
//   neutral   it changes no allocation loch books (sampling, logging, templates, timeouts, …) — or only
//             lowers one, which keeps the reservation an upper bound;
//   refused   loch cannot plan it honestly, or it breaks what loch relies on; the reason says what to do;
//   loch      loch sets it itself (or through a named config key); in `extra` it would fight loch's own.
// `extra` takes the first two classes only, and a flag the table does not know is refused: a flag nobody
// classified is a reservation nobody computed. The integration test walks the pinned engine's own `--help`
// and fails when the engine has a flag the table lacks (or the table names one the engine lacks).
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <variant>
#include <vector>

namespace loch::engines::flags {

enum class FlagClass { planned, neutral, refused, loch };
std::string_view to_string(FlagClass c);

struct FlagRule {
    std::vector<std::string_view> names;  // every spelling the engine accepts
    std::uint8_t values = 0;              // argv entries the flag takes after it
    FlagClass cls = FlagClass::neutral;
    std::string_view why;  // planned: what loch plans; neutral: why memory stays; refused/loch: what instead
};

struct FlagTable {
    std::string_view engine;  // "llama-server"
    // How the engine reads its command line: `--flag=value` (Python's argparse) or only `--flag value`;
    // whether it reads `--a_b` as `--a-b` (llama.cpp's parser does).
    bool equals_form = false;
    bool underscores_are_hyphens = false;
    std::vector<FlagRule> rules;

    const FlagRule* find(std::string_view name) const;
};

// One flag of `extra` with the entries that are its values.
struct ExtraFlag {
    const FlagRule* rule = nullptr;
    std::string name;  // as the table spells it (first spelling that matched)
    std::vector<std::string> values;
};

// The flags of `extra` in order, or the refusal of the first that is refused, set by loch, unknown, or
// short of values — the text names the flag, the reason and what to do instead.
std::variant<std::vector<ExtraFlag>, std::string> read_extra(const FlagTable& table,
                                                             const std::vector<std::string>& extra);

// read_extra's refusal, or nullopt when every flag of `extra` may pass.
std::optional<std::string> refusal(const FlagTable& table, const std::vector<std::string>& extra);

// The flag names an engine's `--help` lists (the option column of each line: llama.cpp's, sd.cpp's and
// whisper.cpp's layouts), in order of appearance, each once.
std::vector<std::string> flag_names_in_help(std::string_view help);

// The tables, one per engine kind (flags/<engine>.cpp).
const FlagTable& llama_server();
const FlagTable& sd_server();
const FlagTable& whisper_server();
const FlagTable& vllm();

}  // namespace loch::engines::flags
