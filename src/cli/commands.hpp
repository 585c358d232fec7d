// cli/commands — each `loch` subcommand registers itself on the CLI11 app. Kept thin: parse flags,
// call the module that does the work, print text or JSON.
#pragma once

#include <CLI/CLI.hpp>

namespace loch::cli {

void add_inspect_command(CLI::App& app);   // cmd_inspect.cpp  — GGUF summary
void add_plan_command(CLI::App& app);      // cmd_plan.cpp     — memory plan per device
void add_devices_command(CLI::App& app);   // cmd_devices.cpp  — what each device really has
void add_doctor_command(CLI::App& app);    // cmd_doctor.cpp   — platform traps and their fixes
void add_serve_command(CLI::App& app);     // cmd_serve.cpp    — the broker
void add_control_commands(CLI::App& app);  // cmd_control.cpp — ps, status, logs, load, unload (a client)

}  // namespace loch::cli
