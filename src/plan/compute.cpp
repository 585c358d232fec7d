#include "plan/compute.hpp"

#include <algorithm>

namespace loch::plan {
namespace {

constexpr std::uint64_t kF32 = 4;

struct Dims {
    std::uint64_t n, n_out, E, Q, K, V, F, Fe, X, used, shared, vocab, heads, kv, kv_swa;
};

Dims dims(const ComputeInputs& in) {
    const auto& s = in.shape;
    Dims d{};
    d.n = in.n_ubatch;
    d.n_out = std::max<std::uint32_t>(in.n_outputs, 1);
    d.E = s.n_embd;
    d.Q = std::uint64_t{s.head_k} * s.n_head;
    for (std::uint32_t il = 0; il < s.n_layer; ++il) {
        d.K = std::max<std::uint64_t>(d.K, s.n_embd_k_gqa(il));
        d.V = std::max<std::uint64_t>(d.V, s.n_embd_v_gqa(il));
    }
    d.F = s.n_ff;
    d.Fe = s.n_ff_expert;
    d.X = s.n_expert;
    d.used = s.n_expert_used;
    d.shared = s.n_expert_shared;
    d.vocab = s.n_vocab;
    d.heads = s.n_head;
    d.kv = in.n_kv;
    d.kv_swa = in.n_kv_swa;
    return d;
}

// Graph inputs alive for the whole graph: token ids, positions, output ids (about 5 rows of n_ubatch
// floats, measured) and the KQ mask(s): n_kv x n_ubatch, f16 with flash attention (llama-graph.cpp).
std::uint64_t inputs(const Dims& d, bool flash_attn) {
    const std::uint64_t mask_elem = flash_attn ? 2 : 4;
    return 5 * d.n * kF32 + d.kv * d.n * mask_elem + d.kv_swa * d.n * mask_elem;
}

// The CUDA/HIP flash-attention op allocates, inside the graph's buffer and right after its output, f16
// copies of a quantized K and V (ggml-cuda.cu get_alloc_size -> fattn.cu
// ggml_cuda_flash_attn_ext_get_alloc_size): the tile and MMA kernels read only f16, and the worst-case graph
// (n_ubatch tokens) always picks one of them on a GPU with tensor cores (the vector kernel, which reads
// q4_0/q8_0 directly, is chosen only for one or two tokens per stream). Each copy is the whole view the op
// sees: head size x cells x KV heads x streams. A latent-attention V is a view of K and shares K's copy.
// The copies sit on top of the attention block, so they add to it (H200, gemma-3-12b q4_0 K and V at 4 x 8192
// cells: 297 MiB logged where the block alone is 122).
std::uint64_t flash_attn_f16_copies(const ComputeInputs& in, ComputeBackend backend) {
    if (!in.flash_attn || backend != ComputeBackend::gpu) return 0;
    const bool k_quant = gguf::traits(in.type_k).quantized, v_quant = gguf::traits(in.type_v).quantized;
    if (!k_quant && !v_quant) return 0;
    const auto& s = in.shape;
    std::uint64_t worst = 0;
    for (std::uint32_t il = 0; il < s.n_layer; ++il) {
        const std::uint64_t cells = std::uint64_t{s.is_swa.at(il) ? in.n_kv_swa : in.n_kv} * in.n_stream;
        const std::uint64_t k = k_quant ? std::uint64_t{s.n_embd_k_gqa(il)} * cells * 2 : 0;
        const std::uint64_t v = v_quant && !s.mla ? std::uint64_t{s.n_embd_v_gqa(il)} * cells * 2 : 0;
        worst = std::max(worst, k + v + 2 * 128);  // each copy starts 128-byte aligned
    }
    return worst;
}

// Without flash attention a latent-attention V is not stored transposed (it is a view of the K latent), so
// the graph copies it transposed before KQV (llama-graph.cpp: "v = ggml_cont(ggml_transpose(v))"): the
// latent rank x cells x streams, in the cache's type (H200, DeepSeek-V2-Lite f16 at 32768 cells: 32 MiB).
std::uint64_t latent_v_copy(const ComputeInputs& in) {
    if (in.flash_attn || !in.shape.mla) return 0;
    const auto& t = gguf::traits(in.type_k);
    const std::uint64_t elements = std::uint64_t{in.shape.kv_lora_rank} * in.n_kv * in.n_stream;
    return t.quantized ? elements * 2 : elements * t.type_size / std::max<std::uint64_t>(t.block_size, 1);
}

// Largest set of activations alive at once inside one layer or the output head, in f32 rows of n_ubatch.
// The coefficients are the allocator's measured peaks (docs/plan.md: they match CPU runs to the byte and the
// H200 baseline to 1 MiB); ggml-alloc fragments, so they exceed the naive count of live tensors by one
// or two residual-sized blocks.
std::uint64_t activations(const Dims& d, const ComputeInputs& in, ComputeBackend backend) {
    const std::uint64_t n = d.n;
    const bool gemma = in.shape.arch.starts_with("gemma");
    // Attention: residual, normed input, Q (twice: projection and roped/permuted), K, V (+ post-norm in
    // gemma).
    std::uint64_t attn = 3 * d.E + 2 * d.Q + d.K + d.V + (gemma ? d.E : 0);
    // Per-head Q/K norms (qwen3): projection -> rms_norm -> rope are three Q-sized tensors in a row; the
    // projection's is freed only after the norm has read it, and that hole is too small for the next larger
    // block, so two more Q blocks and one K block stay in the peak (H200, Qwen3-30B-A3B without flash
    // attention: 451 MiB logged, 420 with one Q block). Gemma's extra block above already covers its norms
    // (CPU logs exact without this term; the H200 sweep's gemma cases over without it).
    if (in.shape.qk_norm && !gemma) attn += 2 * d.Q + d.K;
    if (!in.flash_attn) attn += std::max(d.kv, d.kv_swa) * d.heads;  // KQ scores; soft_max runs in place
    // Latent attention (deepseek2) attends in the latent space: the output is kv_lora_rank wide per head
    // before wv_b decompresses it (llama-graph.cpp build_attn_mha, v_mla).
    if (in.shape.mla) attn += std::uint64_t{in.shape.kv_lora_rank} * d.heads;
    // Dense FFN: gate, up and the gated product plus residual blocks (one fewer on a GPU, where the token
    // embedding lookup lives in the host buffer, and in gemma).
    const bool has_dense = d.X == 0 || in.shape.n_layer_dense_lead > 0;
    std::uint64_t ffn = 0;
    if (has_dense) ffn = (backend == ComputeBackend::gpu || gemma ? 3 : 4) * d.E + 3 * d.F;
    if (d.X > 0 && d.used > 0) {
        // Per selected expert: gate, up, product (ggml_mul_mat_id outputs [F_e, used, n]), or the product,
        // down and its weighted copy ([E, used, n]) — whichever is larger. Shared experts (deepseek2) run
        // after the routed ones are summed and never raise the peak (H200: DeepSeek-V2-Lite exact without).
        const std::uint64_t moe =
            std::max(d.used * 3 * d.Fe + 3 * d.E,
                     d.used * (d.Fe + 2 * d.E) + (backend == ComputeBackend::gpu ? 2 * d.E : 0));
        ffn = std::max(ffn, moe);
    }
    // Output head: the last hidden rows, then logits for n_outputs rows.
    std::uint64_t out_bytes = n * kF32 * d.E + d.n_out * kF32 * (d.E + d.vocab);
    if (in.mean_pooling) out_bytes += n * kF32 * (d.E + std::max<std::uint64_t>(in.n_stream, 1));
    return std::max({n * kF32 * attn + flash_attn_f16_copies(in, backend) + latent_v_copy(in), n * kF32 * ffn,
                     out_bytes});
}

}  // namespace

std::uint64_t compute_buffer_bytes(const ComputeInputs& in, ComputeBackend backend) {
    const Dims d = dims(in);
    return activations(d, in, backend) + inputs(d, in.flash_attn);
}

std::uint64_t host_layers_on_gpu_bytes(const ComputeInputs& in, const HostLayerCopies& c) {
    if (c.kv_bytes == 0 && c.weight_bytes == 0) return 0;
    const Dims d = dims(in);
    const std::uint64_t row = d.n * kF32;  // one f32 value per token
    const std::uint64_t head_v = in.shape.head_v ? in.shape.head_v : in.shape.head_k;
    // Alive through every split: the graph inputs (the mask copied to the GPU once) and the residual.
    const std::uint64_t base = inputs(d, in.flash_attn) + row * d.E;
    // The attention split: K and V copies, Q and the attention output (and KQ without flash attention).
    std::uint64_t attention = c.kv_bytes + row * (d.Q + d.heads * head_v);
    if (!in.flash_attn) attention += c.kv_cells * row * d.heads;
    // A weight split: the weight copy with the FFN activations around it (dense: the normed input and two
    // n_ff rows; MoE: the per-expert rows as in activations()), or an attention projection's.
    std::uint64_t ffn = d.E + d.Q + d.K + d.V;
    if (d.X == 0 || in.shape.n_layer_dense_lead > 0) ffn = std::max(ffn, d.E + 2 * d.F);
    if (d.X > 0 && d.used > 0)
        ffn = std::max(ffn, std::max(d.used * 3 * d.Fe + d.E, d.used * (d.Fe + 2 * d.E)));
    const std::uint64_t weight = c.weight_bytes + row * ffn;
    // One residual-sized block for what ggml-alloc's fragmentation adds (gemma-3-12b: 6 MiB measured).
    return base + attention + weight + row * d.E;
}

std::uint64_t host_input_bytes(const ComputeInputs& in) {
    const Dims d = dims(in);
    // The token-embedding lookup and its copy for the device (measured on the H200: two rows of n_embd).
    return 2 * d.n * kF32 * d.E + inputs(d, in.flash_attn);
}

}  // namespace loch::plan
