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
    gguf::GgmlType type_v = gguf::GgmlType::F16;
    std::uint32_t n_stream = 1;  // KV streams (slots without --kv-unified): K and V views span all of them
    // Embeddings with mean pooling (llama-graph.cpp build_pooling): the transposed copy of the last hidden
    // rows and the n_ubatch x sequences averaging matrix ride on the output head.
    bool mean_pooling = false;
    // The output head's weight is f16 or bf16 (output.weight, or the tied token embedding): on a GPU its
    // product with many output rows goes through cuBLAS with f16 temporaries in the pool (runtime growth).
    bool output_half = false;
    // An embedding server: a request is one ubatch and keeps no context, so attention spans at most a
    // ubatch's cells (the graph is still reserved at the whole slot).
    bool embeddings = false;
};

enum class ComputeBackend { cpu, gpu };

// Bytes of the compute buffer on a device that runs layers.
std::uint64_t compute_buffer_bytes(const ComputeInputs& in, ComputeBackend backend);
// Bytes of the host compute buffer when every layer runs on GPUs (inputs and the token-embedding lookup).
std::uint64_t host_input_bytes(const ComputeInputs& in);

// Partial offload (some layers' weights and KV stay on the host). For batches of at least 32 tokens the
// scheduler runs those layers' matrix products on the GPU anyway (ggml-backend.cpp: "1.off", op_offload),
// and every op between two offloaded ones follows them there ("expand gpu down"). So the GPU's compute
// buffer also holds, per host layer, one split's copies of its inputs:
//   - the attention split: the whole K and V of that layer (views of the host KV cache, n_kv cells), plus
//     the KQ scores without flash attention — this is what grows with the context;
//   - each weight split: one host weight tensor (a new split starts at every offloaded weight, so only
//     one is there at a time) with the FFN's activations.
// ggml-alloc reuses a freed split's memory only where the next one fits into it, so the bound adds the
// two (H200: Qwen3-30B-A3B at -c 65536 -ngl 20 needs more than the larger alone).
struct HostLayerCopies {
    std::uint64_t kv_bytes = 0;      // largest K + V of one host layer, all streams (0: no host layer)
    std::uint64_t kv_cells = 0;      // that layer's cells per stream (width of the KQ scores)
    std::uint64_t weight_bytes = 0;  // largest weight tensor of a host layer
};
std::uint64_t host_layers_on_gpu_bytes(const ComputeInputs& in, const HostLayerCopies& copies);

}  // namespace loch::plan
