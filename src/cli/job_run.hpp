// cli/job_run — `loch run [--memory SIZE | --like MODEL] … -- COMMAND ARGS…`: ask a running `loch serve` for
// a hold (broker/holds.hpp), wait for it in loch's queue printing the position and the reason, then run the
// command with only the granted device visible, keep the hold alive while it runs, forward signals, and
// exit with the command's status.
//
// Process group: when `loch run` leads its own group (a shell job), the command joins it, so the terminal's
// Ctrl-C reaches both and loch measures the whole job; otherwise (a script) the command gets a group of its
// own and, on a terminal, the foreground. Signals sent to `loch run` itself (kill, systemd) are forwarded
// to the job's group. The hold is released when the command exits; if `loch run` is killed, loch releases it
// once the group is gone. If loch restarts while the job runs, the next heartbeat re-registers the job as
// running (booked at once, never queued: its memory is in use). `loch cancel hold-N` of a running job sends
// it SIGTERM (SIGKILL 30 s later if it is still there); of a waiting one, ends `loch run` with 1.
//
// Exit status: the command's (128 + signal when a signal ended it); 127 when the command does not exist
// (checked before any hold is asked for); 1 when loch refused the hold or could not be reached; 75
// (EX_TEMPFAIL) when --wait ran out.
#pragma once

#include <chrono>
#include <optional>
#include <string>
#include <vector>

#include "cli/client.hpp"

namespace loch::cli {

struct RunOptions {
    std::string memory;  // "12GiB"; empty = --like or the remembered peak
    std::string like;    // a model's footprint
    std::string device = "auto";
    std::string priority = "interactive";
    std::string name;                          // default: the command's file name
    std::optional<std::chrono::seconds> wait;  // give up waiting after this (default: wait for ever)
    std::chrono::seconds ttl{30};
    std::vector<std::string> command;  // COMMAND ARGS…
};

// The program `command[0]` resolves to through PATH (as execvp would), or nullopt.
std::optional<std::string> find_program(const std::string& name);

int run_job(const ServerAddress& to, const RunOptions& o);

}  // namespace loch::cli
