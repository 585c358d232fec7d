// plan/reservation — the dry-run half of the reservation rule (broker/footprint.hpp), as pure arithmetic:
// what `llama-fit-params` counts on a device plus what a dry run leaves out there.
//
// A dry run allocates nothing, so it never sees the per-process overhead (the CUDA context, cuBLAS
// workspaces, the process itself); on the CPU it counts only the weight buffers it would create, not the
// resident file pages of mapped weights nor their CPU_REPACK copy. Those come from the plan.
// `loch plan --fit --dry-run` and the broker both use this, so an inverse answer passes the same rule the
// broker reserves by.
#pragma once

#include <cstdint>

#include "plan/dry_run.hpp"
#include "plan/plan.hpp"

namespace loch::plan {

struct DryRunCandidate {
    std::uint64_t counted = 0;     // llama-fit-params' buffers on the device, less what it counts in excess
    std::uint64_t leaves_out = 0;  // overhead (+ CPU: resident weights beyond its weight buffers)
    std::uint64_t weights = 0, kv = 0;
    std::uint64_t bytes() const { return counted + leaves_out; }
};

// The candidate for one placement: a CPU placement counts the dry run's host lines, a GPU placement the
// GPU's (its host lines are RAM, not this device). `planned` is the plan of that device; without one
// (a file that cannot be planned) only what the dry run counts.
// `counted_in_excess`: what the dry run is known to count beyond the engine (dry_run_excess), taken off.
DryRunCandidate dry_run_candidate(const DryRunResult& dry, bool cpu_placement, const DevicePlan* planned,
                                  std::uint64_t counted_in_excess = 0);

// What llama-fit-params counts on `device` beyond what llama-server allocates with the same flags: it
// reserves its graph and its output buffer for n_batch rows of logits (common/fit.cpp), the server for one
// row per slot. The difference is the planner's compute and output at n_batch output rows less those at the
// server's — 1.9 GiB at ubatch 4096 for a 152k vocabulary (H200 sweep, docs/plan-accuracy.md). Zero when the
// plan cannot be made or the device is not in it.
std::uint64_t dry_run_excess(const gguf::Model& model, const Settings& server, const std::string& device);

}  // namespace loch::plan
