// Test helper: run build/bin/loch with arguments (and optional environment assignments), capture stdout and
// the exit status. Shared by tests/devices and tests/doctor.
#pragma once

#include <sys/wait.h>

#include <cstdio>
#include <filesystem>
#include <memory>
#include <string>
#include <vector>

namespace loch::testing {

struct LochRun {
    int status = -1;  // exit status, -1 when it did not exit normally
    std::string out;  // stdout
};

// `env` entries are "NAME=value"; arguments are single-quoted for /bin/sh (test inputs only).
// `with_stderr`: stderr is captured into `out` too.
inline LochRun run_loch(const std::vector<std::string>& args, const std::vector<std::string>& env = {},
                        bool with_stderr = false) {
    auto quote = [](const std::string& s) {
        std::string q = "'";
        for (char c : s) q += c == '\'' ? std::string("'\\''") : std::string(1, c);
        return q + "'";
    };
    std::string cmd = "env";
    for (const auto& e : env) cmd += " " + quote(e);
    cmd += " " + quote(std::string(LOCH_BIN_DIR) + "/loch");
    for (const auto& a : args) cmd += " " + quote(a);
    if (with_stderr) cmd += " 2>&1";
    LochRun r;
    FILE* pipe = ::popen(cmd.c_str(), "r");
    if (!pipe) return r;
    char buf[4096];
    while (auto n = std::fread(buf, 1, sizeof buf, pipe)) r.out.append(buf, n);
    const int st = ::pclose(pipe);
    if (WIFEXITED(st)) r.status = WEXITSTATUS(st);
    return r;
}

}  // namespace loch::testing
