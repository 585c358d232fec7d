// plan/compute — the compute buffer: the peak of ggml's graph allocator for the worst-case graph
// (n_ubatch tokens against the full KV cache) that llama_context reserves at start.
//
// ggml-alloc frees a tensor after its last consumer and reuses memory in place for element-wise ops, so the
// peak is the largest set of activations alive at once: the residual stream plus one attention block, one
// FFN block (dense or mixture of experts), or the output head, plus the graph inputs (the KQ mask is
// n_kv x n_ubatch and lives through every layer). docs/plan.md derives each term from the graph builders.
#pragma once

#include <cstdint>

#include "gguf/ggml_types.hpp"
#include "plan/shape.hpp"

namespace loch::plan {

struct ComputeInputs {
    const ModelShape& shape;
    std::uint32_t n_ubatch;
    std::uint32_t n_outputs;  // rows of logits in the reserve graph
    std::uint32_t n_kv;       // KV cells per stream (the mask width)
    std::uint32_t n_kv_swa;   // SWA cache cells per stream (0 without SWA layers)
    bool flash_attn;
    gguf::GgmlType type_k;
};

enum class ComputeBackend { cpu, gpu };

// Bytes of the compute buffer on a device that runs layers.
std::uint64_t compute_buffer_bytes(const ComputeInputs& in, ComputeBackend backend);
// Bytes of the host compute buffer when every layer runs on GPUs (inputs and the token-embedding lookup).
std::uint64_t host_input_bytes(const ComputeInputs& in);

}  // namespace loch::plan
