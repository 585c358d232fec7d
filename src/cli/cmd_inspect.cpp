#include "cli/commands.hpp"

namespace loch::cli {

void add_inspect_command(CLI::App& app) {
    // Placeholder until the module behind it lands.
    auto* cmd = app.add_subcommand("inspect", "not implemented yet");
    cmd->callback([] { throw std::runtime_error("'inspect' is not implemented yet"); });
}

}  // namespace loch::cli
