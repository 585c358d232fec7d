// support/engine_build_dir — an engine folder laid out as scripts/setup.sh lays build/bin out: executables
// (empty scripts: nothing runs them) and the engine-build.json that names each folder's backend.
#pragma once

#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

namespace loch::test {

// Writes `dir`/<program> for each program, executable, and `dir`/engine-build.json for `backend` ("" writes
// no such file: a build of unknown backend).
inline void write_engine_build(const std::filesystem::path& dir, const std::string& backend,
                               const std::vector<std::string>& programs, const std::string& targets = "") {
    namespace fs = std::filesystem;
    fs::create_directories(dir);
    std::string engines;
    for (const auto& p : programs) {
        std::ofstream(dir / p) << "#!/bin/sh\nexit 1\n";
        fs::permissions(dir / p, fs::perms::owner_all);
        engines += (engines.empty() ? "" : ", ") + ("\"" + p + "\": \"test\"");
    }
    if (!backend.empty())
        std::ofstream(dir / "engine-build.json") << "{\"backend\": \"" << backend << "\", \"targets\": \""
                                                 << targets << "\", \"engines\": {" << engines << "}}\n";
}

}  // namespace loch::test
