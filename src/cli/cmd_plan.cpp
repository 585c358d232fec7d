#include "cli/commands.hpp"

namespace loch::cli {

void add_plan_command(CLI::App& app) {
    // Placeholder until the module behind it lands.
    auto* cmd = app.add_subcommand("plan", "not implemented yet");
    cmd->callback([] { throw std::runtime_error("'plan' is not implemented yet"); });
}

}  // namespace loch::cli
