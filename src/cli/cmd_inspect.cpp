// `loch inspect FILE [--json]`: what a GGUF file holds (shape, size per type, attention layout, tokenizer).
#include <cstdio>
#include <memory>
#include <string>

#include <nlohmann/json.hpp>

#include "cli/commands.hpp"
#include "cli/text.hpp"
#include "gguf/reader.hpp"
#include "gguf/summary.hpp"

namespace loch::cli {
namespace {

struct InspectOptions {
    std::string file;
    bool json = false;
};

void run_inspect(const InspectOptions& opt) {
    try {
        const gguf::Summary s = gguf::summarize(gguf::read_model(opt.file));
        if (opt.json) {
            std::printf("%s\n", pretty_json(gguf::to_json(s)).c_str());
        } else {
            std::printf("%s", gguf::to_text(s).c_str());
        }
    } catch (const gguf::FormatError& e) {
        if (opt.json) {
            const nlohmann::json err = {{"error",
                                         {{"kind", "gguf_format"},
                                          {"file", e.file()},
                                          {"offset", e.offset()},
                                          {"message", e.detail()}}}};
            std::printf("%s\n", pretty_json(err).c_str());
        }
        throw std::runtime_error(std::string("not a valid GGUF model: ") + e.what());
    } catch (const std::system_error& e) {
        if (opt.json) {
            const nlohmann::json err = {
                {"error", {{"kind", "io"}, {"file", opt.file}, {"message", e.what()}}}};
            std::printf("%s\n", pretty_json(err).c_str());
        }
        throw;
    }
}

}  // namespace

void add_inspect_command(CLI::App& app) {
    auto opt = std::make_shared<InspectOptions>();
    auto* cmd =
        app.add_subcommand("inspect", "Show a GGUF model's shape, size per tensor type and attention layout");
    cmd->add_option("file", opt->file, "GGUF file (any part of a split model)")->required();
    cmd->add_flag("--json", opt->json, "Print the summary as JSON");
    cmd->callback([opt] { run_inspect(*opt); });
}

}  // namespace loch::cli
