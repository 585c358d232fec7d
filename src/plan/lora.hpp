// plan/lora — LoRA adapters on a llama-server model (`args.lora`, the engine's --lora / --lora-scaled),
// from the adapter GGUF and the model's header. Pure: no engine, no config.
//
// What the pinned llama.cpp does with one (src/llama-adapter.cpp, src/llama-graph.cpp build_lora_mm):
//   - at load, every pair `<tensor>.lora_a` / `<tensor>.lora_b` is checked against the model tensor it adapts
//     (same architecture, the tensor exists, A is [in, rank] and B [rank, out]) and copied into a buffer of
//     that tensor's own buffer type: the same device as the weight (a CPU repack buffer falls back to plain
//     host memory). The data go through a host vector the size of one tensor.
//   - applying adapters makes the context reserve its graph again (sched_need_reserve) with, per adapted
//     weight W·x, two more products: t = A·x (rank x tokens) and B·t (out x tokens), scaled and added to
//     W·x. ggml-alloc frees t after B·t and scales and adds in place, so beyond the base graph's peak at
//     most one adapted product's activations live at once: (out + rank)·tokens floats. Measured on an H100
//     (bench/gpu-sweep.sh lora, 12 cases): the compute buffer grew by 0–12 MiB beyond the base graph's plan
//     where this books 28–224 MiB. `token_embd` is the exception (A and B flipped: B·rows(A), out = the
//     model's width) and runs with the inputs.
//   - on a GPU an unquantized A or B goes through cuBLAS: f16 copies of the operand and the result in
//     ggml-cuda's pool (in + rank, or rank + out, x tokens x 2 bytes), and cuBLAS's GEMM kernels load into
//     device memory if nothing else loaded them (plan.hpp kCublasGemmGrowthBytes).
// Every adapter is planned as applied at full strength: `--lora-init-without-apply` and per-request scales
// only ever use less.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "gguf/model.hpp"

namespace loch::plan {

struct LoraPair {
    std::string base;  // the model tensor it adapts ("blk.3.attn_q.weight")
    gguf::TensorInfo a, b;

    std::uint64_t rank() const;
    std::uint64_t width_in() const;   // what the product reads per token
    std::uint64_t width_out() const;  // what it yields per token
    bool quantized() const;           // both A and B quantized (then no cuBLAS path)
};

struct LoraAdapter {
    float alpha = 0;
    std::vector<LoraPair> pairs;
    std::uint64_t bytes() const;  // A and B of every pair, as in the file
};

// Reads `adapter` as llama.cpp's loader does against `model` (both headers) and throws std::runtime_error
// with the loader's own reason for anything it would refuse: general.type not "adapter", adapter.type not
// "lora", another architecture, a tensor that is not a pair half (norm vectors are skipped, as there), a
// half without its other half, a tensor the model lacks, shapes that do not match.
LoraAdapter read_lora(const gguf::Model& adapter, const gguf::Model& model);

// The extra activations of the adapted products beyond the base graph's peak (see above), for the pairs given
// (one device's, or all): tokens are n_outputs for the output head, n_ubatch elsewhere.
std::uint64_t lora_compute_bytes(const std::vector<LoraPair>& pairs, std::uint32_t n_ubatch,
                                 std::uint32_t n_outputs);
// ggml-cuda pool growth for the largest unquantized adapted product (f16 operand and result copies).
std::uint64_t lora_gpu_pool_bytes(const std::vector<LoraPair>& pairs, std::uint32_t n_ubatch,
                                  std::uint32_t n_outputs);

}  // namespace loch::plan
