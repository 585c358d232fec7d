#include "cli/engine_binaries.hpp"

#include <algorithm>

namespace loch::cli {

namespace {

void add(std::vector<doctor::EngineBinary>& out, const std::string& program,
         const std::vector<config::EngineBuild>& builds) {
    for (const auto& b : builds) out.push_back({program, b.program.string(), b.backend, b.from});
}

}  // namespace

std::vector<doctor::EngineBinary> engine_binaries(const std::filesystem::path& engine_dir) {
    const auto ctx = config::LoadContext::from_process();
    std::vector<std::filesystem::path> dirs{engine_dir};
    dirs.insert(dirs.end(), ctx.path_dirs.begin(), ctx.path_dirs.end());
    std::vector<doctor::EngineBinary> out;
    for (const std::string program : {"llama-server", "sd-server", "whisper-server"}) {
        const auto found = config::find_executable(program, dirs);
        add(out, program,
            config::find_engine_builds(engine_dir, program, found.value_or(std::filesystem::path())));
    }
    return out;
}

std::vector<doctor::EngineBinary> engine_binaries(const config::Config& cfg) {
    std::vector<doctor::EngineBinary> out;
    for (const auto& [kind, program] : cfg.programs) add(out, kind, cfg.builds_of(kind));
    return out;
}

DeviceEngines engines_for(const devices::Device& d, const std::vector<doctor::EngineBinary>& builds) {
    const auto candidates = devices::backends_of(d);
    DeviceEngines out{candidates.front(), {}};
    for (const auto& c : candidates)
        if (std::any_of(builds.begin(), builds.end(), [&](const auto& b) { return b.backend == c; })) {
            out.backend = c;
            break;
        }
    std::vector<std::string> programs;
    for (const auto& b : builds)
        if (std::find(programs.begin(), programs.end(), b.program) == programs.end())
            programs.push_back(b.program);
    for (const auto& p : programs) {
        std::string exact, unknown;
        for (const auto& b : builds) {
            if (b.program != p) continue;
            if (b.backend == out.backend && exact.empty()) exact = b.path;
            if (b.backend.empty() && unknown.empty()) unknown = b.path;
        }
        out.programs.emplace_back(p, exact.empty() ? unknown : exact);
    }
    return out;
}

}  // namespace loch::cli
