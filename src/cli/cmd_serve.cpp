#include "cli/commands.hpp"

namespace loch::cli {

void add_serve_command(CLI::App& app) {
    // Placeholder until the module behind it lands.
    auto* cmd = app.add_subcommand("serve", "not implemented yet");
    cmd->callback([] { throw std::runtime_error("'serve' is not implemented yet"); });
}

}  // namespace loch::cli
