// config/engine_builds — which engine binary reaches which backend. scripts/setup.sh puts the CPU builds of
// the pinned engines in one folder (loch's own, `engine_dir`) and each GPU build in a folder named after its
// backend below it (engine_dir/cuda/, engine_dir/vulkan/, engine_dir/rocm/), each with an engine-build.json:
//   {"backend": "cuda", "targets": "61;90", "engines": {"llama-server": "llama de3ff81", …}}
// A binary no such file describes (built by hand, found on PATH) is of unknown backend: loch starts it for
// any device, as it did before builds were told apart, and the doctor says it cannot tell
// (docs/engine-build.md).
#pragma once

#include <filesystem>
#include <string>
#include <string_view>
#include <vector>

namespace loch::config {

// The GPU backends that have a folder of their own under engine_dir; the CPU's builds sit in engine_dir.
inline constexpr std::string_view kGpuBackends[] = {"cuda", "rocm", "vulkan"};

struct EngineBuild {
    std::filesystem::path program;
    std::string backend;  // "cpu" | "cuda" | "rocm" | "vulkan"; "" when nothing says (it may reach any)
    std::string targets;  // what it was compiled for: "61;90" (CUDA), "gfx1151" (ROCm); "" when not said
    std::string from;     // the engine-build.json that said so, or why the backend is unknown

    bool reaches(std::string_view b) const { return backend.empty() || backend == b; }
};

// What an engine-build.json's text says of `program` at `path`: its backend and targets when it lists it, an
// unknown backend (with why in `from`) otherwise — never a throw, whatever the text (fuzzed).
EngineBuild describe_engine_build(std::string_view json_text, std::string_view program,
                                  std::filesystem::path path, const std::string& file);

// The builds of `program` that exist: engine_dir/<backend>/program for each GPU backend, then `fallback` (the
// program found in engine_dir or on PATH), whose backend engine_dir/engine-build.json gives when it lists it.
std::vector<EngineBuild> find_engine_builds(const std::filesystem::path& engine_dir, std::string_view program,
                                            const std::filesystem::path& fallback);

// The build of a list that reaches `backend`: its own first, then one of unknown backend; nullptr when none.
const EngineBuild* build_for(const std::vector<EngineBuild>& builds, std::string_view backend);

}  // namespace loch::config
