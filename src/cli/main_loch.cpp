// loch — the command line entry point. Each subcommand lives in its own cmd_*.cpp.
#include <cstdio>
#include <exception>
#include <string>

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
    loch::cli::add_control_commands(app);
    // `loch help` and `loch help serve` are what people type: the same as --help.
    if (argc > 1 && std::string(argv[1]) == "help") {
        if (argc > 2)
            for (auto* sub : app.get_subcommands({}))
                if (sub->get_name() == argv[2]) {
                    std::printf("%s", sub->help().c_str());
                    return 0;
                }
        std::printf("%s", app.help().c_str());
        return 0;
    }
    // A word where a command belongs that names none: say which, and what exists (CLI11 would only say that a
    // subcommand is required).
    if (argc > 1 && argv[1][0] != '-') {
        std::string known;
        bool found = false;
        for (const auto* sub : app.get_subcommands({})) {
            found |= sub->get_name() == argv[1];
            known += (known.empty() ? "" : ", ") + sub->get_name();
        }
        if (!found) {
            std::fprintf(stderr, "loch: unknown command '%s' (commands: %s; loch --help)\n", argv[1],
                         known.c_str());
            return 2;
        }
    }
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
