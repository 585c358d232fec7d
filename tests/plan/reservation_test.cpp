// plan/reservation: the dry run's candidate for the broker's rule — what it counts plus what it leaves out.
#include <gtest/gtest.h>

#include <fmt/format.h>

#include "plan/reservation.hpp"
#include "synth/synth.hpp"

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

TEST(DryRunCandidate, What_it_counts_in_excess_is_taken_off_its_compute_never_its_weights_or_KV) {
    DevicePlan gpu;
    gpu.overhead.bytes = 632 * kMiB;
    auto c = dry_run_candidate(dry(4026, 281), false, &gpu, 200 * kMiB);
    EXPECT_EQ(c.counted, (4026 + 512 + 258 - 200) * kMiB);
    c = dry_run_candidate(dry(4026, 281), false, &gpu, 10'000 * kMiB);
    EXPECT_EQ(c.counted, (4026 + 512) * kMiB);
}

// The H200 sweep: llama-fit-params reserves its graph for n_batch rows of logits, llama-server for one per
// slot; at ubatch 4096 with a 152k vocabulary that was 1.9 GiB of the dry run's count (+85 % on a 2.2 GiB
// model).
TEST(DryRunExcess, Is_the_output_rows_llama_fit_params_reserves_beyond_the_servers) {
    const auto* p = synth::find_preset("qwen2.5-7b");
    ASSERT_NE(p, nullptr);
    const auto model = synth::build_model(p->shape, "q4_k_m");
    Settings s;
    s.n_ctx = 4096;
    s.gpus = {"cuda0"};
    s.n_batch = 4096;
    s.n_ubatch = 4096;
    const auto excess = dry_run_excess(model, s, "cuda0");
    // llama-fit-params' graph peaks at its output head: 4096 rows of the last hidden state and of logits
    // (4 x (n_embd + n_embd + n_vocab) bytes each); the server's graph at its layers' activations.
    const double fit_peak = 4096.0 * 4 * (3584 + 3584 + 152064);
    const double server_compute = double(make_plan(model, s).find("cuda0")->compute.bytes);
    EXPECT_NEAR(double(excess), fit_peak - server_compute, 0.02 * fit_peak);
    EXPECT_GT(double(excess), 1.0e9);
    // At the defaults (ubatch 512, one slot) the graph at 512 rows still exceeds the server's one row.
    s.n_batch = 2048;
    s.n_ubatch = 512;
    EXPECT_GT(dry_run_excess(model, s, "cuda0"), 0u);
    s.n_batch = s.n_ubatch = 1;  // one row both ways: nothing in excess
    EXPECT_EQ(dry_run_excess(model, s, "cuda0"), 0u);
}

}  // namespace
}  // namespace loch::plan
