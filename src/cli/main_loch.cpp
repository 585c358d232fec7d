// loch — the command line entry point. Each subcommand lives in its own cmd_*.cpp.
#include <cstdio>
#include <exception>

#include <CLI/CLI.hpp>

#include "cli/commands.hpp"

int main(int argc, char** argv) {
    CLI::App app{"loch — a broker for local AI inference"};
    app.require_subcommand(1);
    app.set_version_flag("--version", "loch 0.1.0");
    loch::cli::add_inspect_command(app);
    loch::cli::add_plan_command(app);
    loch::cli::add_devices_command(app);
    loch::cli::add_doctor_command(app);
    loch::cli::add_serve_command(app);
    try {
        app.parse(argc, argv);
    } catch (const CLI::ParseError& e) {
        return app.exit(e);
    } catch (const std::exception& e) {
        std::fprintf(stderr, "loch: error: %s\n", e.what());
        return 1;
    }
    return 0;
}
