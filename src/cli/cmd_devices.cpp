#include "cli/commands.hpp"

namespace loch::cli {

void add_devices_command(CLI::App& app) {
    // Placeholder until the module behind it lands.
    auto* cmd = app.add_subcommand("devices", "not implemented yet");
    cmd->callback([] { throw std::runtime_error("'devices' is not implemented yet"); });
}

}  // namespace loch::cli
