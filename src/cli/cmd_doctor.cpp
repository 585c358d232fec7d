#include "cli/commands.hpp"

namespace loch::cli {

void add_doctor_command(CLI::App& app) {
    // Placeholder until the module behind it lands.
    auto* cmd = app.add_subcommand("doctor", "not implemented yet");
    cmd->callback([] { throw std::runtime_error("'doctor' is not implemented yet"); });
}

}  // namespace loch::cli
