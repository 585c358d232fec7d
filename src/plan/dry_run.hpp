// plan/dry_run — the engine's own estimate: run the pinned `llama-fit-params --fit-print on` with the
// same flags the engine would get and read its per-device MiB lines.
//
// llama-fit-params loads the model without allocating (no_alloc) and prints on stdout one line per device
// and one for the host: "<device> <model MiB> <context MiB> <compute MiB>", e.g. "CUDA0 4026 512 258".
// The figures are floored to whole MiB; "context" is the KV cache only (the output buffer is not counted),
// and nothing covers the CUDA context or the output buffer: see docs/plan.md.
#pragma once

#include <chrono>
#include <cstdint>
#include <filesystem>
#include <string>
#include <string_view>
#include <vector>

#include "core/memory.hpp"

namespace loch::plan {

struct DryRunDevice {
    std::string name;    // as printed: "CUDA0", "Host"
    std::string device;  // loch id: "cuda0", "cpu"
    MemoryFigure model, context, compute;
    std::uint64_t total() const { return model.bytes + context.bytes + compute.bytes; }
};

struct DryRunResult {
    std::vector<DryRunDevice> devices;  // in printed order (host last)
    const DryRunDevice* find(std::string_view device) const;
};

// Parses llama-fit-params stdout. Lines that are not "<name> <int> <int> <int>" are ignored (the first
// stdout line is the fitted CLI arguments, "-c 4096 -ngl 33"). Throws std::runtime_error when no device
// line was found, naming the first bytes of the text.
DryRunResult parse_fit_print(std::string_view stdout_text);

// Runs `<fit_params_binary> -m MODEL <engine_args...> --fit off --fit-print on` without a shell and parses
// its stdout. Throws std::runtime_error with the exit status and the tail of stderr on failure.
// The dry-run tool's name, and where `loch plan` looks for it: next to `near` (loch's own folder), then PATH.
inline constexpr std::string_view kFitParamsProgram = "llama-fit-params";
std::string find_fit_params(const std::filesystem::path& near);

DryRunResult run_fit_params(const std::string& fit_params_binary, const std::string& model_path,
                            const std::vector<std::string>& engine_args,
                            std::chrono::seconds timeout = std::chrono::seconds(120));

// Runs a program (argv[0] is looked up in PATH only when it has no '/') without a shell, capturing stdout
// and stderr; kills it after `timeout`. Used for the dry run and by the benchmark.
struct ProcessResult {
    int exit_status = -1;  // exit code, or 128+signal
    bool timed_out = false;
    std::string out, err;
};
ProcessResult run_capture(const std::vector<std::string>& argv, std::chrono::milliseconds timeout);

}  // namespace loch::plan
