// The engine builds against the devices: a GPU that no build of an engine reaches gets no model of it (loch
// never starts a CPU build with `--device CUDA0`, which exits), so it must be said loudly, with the build
// that would reach it.
#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <map>
#include <set>

#include "doctor/checks.hpp"

namespace loch::doctor::checks {

namespace {

std::string fix_for(const std::string& backend) {
    if (backend == "cuda")
        return "build the CUDA engines: bash scripts/setup.sh --backend cuda (add --images / --speech for "
               "the "
               "image and speech engines). It needs nvcc: a CUDA toolkit — NVIDIA's, or Debian's "
               "nvidia-cuda-toolkit from the non-free component. Or build the Vulkan ones, which need only "
               "Debian's packages: bash scripts/setup.sh --backend vulkan";
    if (backend == "rocm")
        return "build the engines for this GPU: bash scripts/setup.sh --backend vulkan (Debian's packages "
               "only), or install ROCm (docs/strix-halo.md) and run bash scripts/setup.sh --backend rocm";
    return "build the Vulkan engines: bash scripts/setup.sh --backend " + backend;
}

}  // namespace

void engine_build_missing(const DeviceReport& r, const Input& in, Findings& out) {
    if (in.engine_builds.empty()) return;
    std::map<std::string, std::vector<const EngineBinary*>> by_program;
    for (const auto& b : in.engine_builds) by_program[b.program].push_back(&b);
    for (const auto& d : r.devices) {
        if (d.vendor == devices::Vendor::cpu || d.software) continue;
        const auto backends = devices::backends_of(d);
        std::vector<std::string> unreached, reached;
        for (const auto& [program, builds] : by_program) {
            const bool reaches = std::any_of(builds.begin(), builds.end(), [&](const EngineBinary* b) {
                return b->backend.empty() ||
                       std::find(backends.begin(), backends.end(), b->backend) != backends.end();
            });
            (reaches ? reached : unreached).push_back(program);
        }
        if (unreached.empty()) continue;
        Finding f;
        f.id = "engine-build-missing";
        f.device = d.id;
        // The chat engine missing is the whole GPU unused; another one is that engine's models on the CPU.
        const bool chat = std::find(unreached.begin(), unreached.end(), "llama-server") != unreached.end();
        f.severity = chat || reached.empty() ? Severity::error : Severity::warning;
        f.evidence.emplace_back(
            "device", d.name.empty() ? d.id : d.name,
            fmt::format("{} (backends that reach it: {})", d.id, fmt::join(backends, ", ")));
        for (const auto& program : unreached)
            for (const auto* b : by_program[program])
                f.evidence.emplace_back(
                    program, b->path + " (" + (b->backend.empty() ? "?" : b->backend) + ")", b->from);
        f.explanation = fmt::format(
            "{} has no {} build that reaches it — only builds for {}. loch will not start them there (a CPU "
            "build asked for this GPU exits at its first argument), so the models of {} run {}.",
            d.id, fmt::join(unreached, ", "),
            [&] {
                std::set<std::string> other;
                for (const auto& p : unreached)
                    for (const auto* b : by_program[p]) other.insert(b->backend.empty() ? "?" : b->backend);
                return fmt::format("{}", fmt::join(other, ", "));
            }(),
            fmt::join(unreached, ", "),
            "elsewhere (on the CPU only where a model allows it: cpu_fallback or devices: [cpu]) or not at "
            "all");
        f.fix = fix_for(backends.front());
        out.push_back(std::move(f));
    }
}

}  // namespace loch::doctor::checks
