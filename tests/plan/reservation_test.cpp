// plan/reservation: the dry run's candidate for the broker's rule — what it counts plus what it leaves out.
#include <gtest/gtest.h>

#include <fmt/format.h>

#include "plan/reservation.hpp"

namespace loch::plan {
namespace {

DryRunResult dry(std::uint64_t gpu_model, std::uint64_t host_model) {
    return parse_fit_print(
        fmt::format("-c 4096 -ngl 33\nCUDA0 {} 512 258\nHost {} 0 16\n", gpu_model, host_model));
}

TEST(DryRunCandidate, A_GPU_placement_adds_the_overhead_and_ignores_host_lines) {
    DevicePlan gpu;
    gpu.overhead.bytes = 632 * kMiB;
    const auto c = dry_run_candidate(dry(4026, 281), false, &gpu);
    EXPECT_EQ(c.counted, (4026 + 512 + 258) * kMiB);
    EXPECT_EQ(c.leaves_out, 632 * kMiB);
    EXPECT_EQ(c.weights, 4026 * kMiB);
    EXPECT_EQ(c.kv, 512 * kMiB);
}

TEST(DryRunCandidate, A_CPU_placement_adds_resident_weights_beyond_the_dry_runs_buffers) {
    DevicePlan cpu;
    cpu.overhead.bytes = 64 * kMiB;
    cpu.weights.bytes = 4685 * kMiB;  // mapped file range
    cpu.repack.bytes = 3204 * kMiB;   // CPU_REPACK copy (8B Q4_K_M)
    const auto c = dry_run_candidate(dry(0, 2000), true, &cpu);
    EXPECT_EQ(c.counted, (2000 + 16) * kMiB);
    EXPECT_EQ(c.leaves_out, (64 + 4685 + 3204 - 2000) * kMiB);
    EXPECT_EQ(c.bytes(), c.counted + c.leaves_out);
}

TEST(DryRunCandidate, Without_a_plan_only_what_it_counts) {
    const auto c = dry_run_candidate(dry(4026, 281), false, nullptr);
    EXPECT_EQ(c.leaves_out, 0u);
    EXPECT_EQ(c.counted, (4026 + 512 + 258) * kMiB);
}

}  // namespace
}  // namespace loch::plan
