// plan/runtime_growth — what a GPU engine's process grows by after real prompts, outside every ggml buffer
// (the CUDA memory pool's temporaries, cuBLAS workspaces): plan.hpp declares it.
#include <algorithm>
#include <cmath>

#include "plan/compute.hpp"
#include "plan/plan.hpp"

namespace loch::plan {

std::uint64_t runtime_growth_bytes(const ComputeInputs& in) {
    const ModelShape& shape = in.shape;
    // The CUDA backend's memory pool (ggml-cuda.cu, ggml_cuda_pool_vmm): temporaries of one op at a time,
    // allocated and freed in stack order, so the pool's physical size is the largest single op's need, mapped
    // in 2 MiB granules and never given back. Not in any ggml buffer, so neither the dry run nor the engine's
    // buffer lines show it.
    constexpr std::uint64_t kGranule = 2 * kMiB;
    const auto granules = [](std::uint64_t b) { return (b + kGranule - 1) / kGranule * kGranule; };
    const std::uint64_t n = in.n_ubatch;
    std::uint64_t pool = 0;
    if (!in.flash_attn) {
        // Attention without flash attention goes through ggml_cuda_mul_mat_batched_cublas with f16 compute
        // (every card but Volta, RDNA4 and CDNA): KQ = K·Q converts Q to f16 (head_k x n x heads) and writes
        // an f16 result before widening it (n_kv x n x heads); KQV = V·softmax(KQ) converts KQ to f16
        // (n_kv x n x heads) and writes head_v x n x heads in f16. A quantized K is converted to f16 whole.
        // n_kv is the widest cache a layer attends over (the whole per-slot context once a prompt fills it).
        std::uint64_t kv = std::max(in.n_kv, in.n_kv_swa);
        if (in.embeddings) kv = std::min<std::uint64_t>(kv, (n + 255) / 256 * 256);
        const std::uint64_t heads = shape.n_head;
        const std::uint64_t head = std::max(shape.head_k, shape.head_v ? shape.head_v : shape.head_k);
        std::uint64_t k_f16 = 0;
        if (gguf::traits(in.type_k).quantized) {
            for (std::uint32_t il = 0; il < shape.n_layer; ++il)
                k_f16 = std::max<std::uint64_t>(k_f16,
                                                std::uint64_t{shape.n_embd_k_gqa(il)} * kv * in.n_stream * 2);
        }
        pool = std::max(pool, 2 * n * heads * (kv + head) + k_f16);
    }
    if (shape.n_expert > 0 && shape.n_expert_used > 0) {
        // ggml_cuda_mul_mat_id sorts each expert's rows into pool buffers: the input (n_embd or n_ff_exp) and
        // the output rows of every selected expert, f32. At least the 96 MiB the H200 showed for MoE models
        // with flash attention at ubatch 512 (other temporaries of the expert path: mmq's q8_1 inputs).
        const std::uint64_t rows = n * shape.n_expert_used;
        pool = std::max({pool, 96 * kMiB, rows * (std::uint64_t{shape.n_embd} + shape.n_ff_expert) * 4});
    }
    if (in.output_half && in.n_outputs > 8) {
        // The output head with an f16/bf16 weight (ggml_cuda_op_mul_mat_cublas): the rows converted to f16
        // and the product written in f16 before it is widened into the graph's f32 logits — vocab x outputs
        // x 2 bytes. A chat's few rows (one per slot, at most 8) take ggml's vector kernel instead
        // (MMVF_MAX_BATCH_SIZE); an embedding server makes every token of a ubatch an output (H100:
        // gemma3-shaped, 262k vocabulary, ubatch 8192: 4 GiB that no buffer line shows).
        const std::uint64_t rows = std::max<std::uint32_t>(in.n_outputs, 1);
        pool = std::max(pool, rows * (std::uint64_t{shape.n_vocab} + shape.n_embd) * 2);
    }
    // Plus what every GPU process grows by with real prompts (cuBLAS workspace, small pool temporaries):
    // 20-26 MiB on the H200 for dense models with flash attention. Without flash attention the attention runs
    // through cuBLAS's batched GEMMs, whose kernels the driver loads lazily on first use
    // (CUDA_MODULE_LOADING=LAZY, the default since CUDA 11.7) into device memory outside any pool: 20-54 MiB
    // more on the H200 for every shape in the settings sweep (docs/plan-accuracy.md), so 64 MiB.
    const std::uint64_t runtime = in.flash_attn ? 32 * kMiB : 96 * kMiB;
    return runtime + granules(pool);
}

}  // namespace loch::plan
