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

// Graph inputs alive for the whole graph: token ids, positions, output ids, the KQ mask(s).
std::uint64_t inputs(const Dims& d, bool flash_attn) {
    const std::uint64_t mask_elem = flash_attn ? 2 : 4;  // llama-graph.cpp: f16 mask for flash attention
    return d.n * 4 * 2 + d.n_out * 4 + d.kv * d.n * mask_elem + d.kv_swa * d.n * mask_elem;
}

// Largest set of activations alive at once inside one layer or the output head (f32, n_ubatch rows).
std::uint64_t activations(const Dims& d, const ComputeInputs& in) {
    const std::uint64_t n = d.n;
    // Attention: residual + normed input + Q, K, V + attention output (+ the KQ matrix without flash
    // attention).
    std::uint64_t attn = n * kF32 * (2 * d.E + d.Q + d.K + d.V + d.Q);
    if (!in.flash_attn) {
        const std::uint64_t widest = std::max(d.kv, d.kv_swa);
        attn += widest * n * d.heads * kF32;  // KQ (soft_max runs in place)
    }
    // Dense FFN: residual + gate + up + the gated product.
    std::uint64_t ffn = n * kF32 * (d.E + 3 * d.F);
    if (d.X > 0 && d.used > 0) {
        // Router logits and probabilities, then per selected expert: gate, up, product, down, weighted down.
        const std::uint64_t per_tok =
            2 * d.X + d.used * std::max(3 * d.Fe, d.Fe + 2 * d.E) + 3 * d.shared * d.Fe;
        ffn = std::max(ffn, n * kF32 * (d.E + per_tok));
    }
    // Output head: residual of the output rows, norm, logits.
    std::uint64_t out = n * kF32 * d.E + d.n_out * kF32 * (d.E + d.vocab);
    return std::max({attn, ffn, out});
}

}  // namespace

std::uint64_t compute_buffer_bytes(const ComputeInputs& in, ComputeBackend backend) {
    const Dims d = dims(in);
    std::uint64_t bytes = activations(d, in) + inputs(d, in.flash_attn);
    if (backend == ComputeBackend::gpu) {
        // The token-embedding lookup runs on the host; its rows are copied in once.
        bytes += d.n * kF32 * d.E;
    }
    return bytes;
}

std::uint64_t host_input_bytes(const ComputeInputs& in) {
    const Dims d = dims(in);
    return d.n * kF32 * d.E + inputs(d, in.flash_attn);
}

}  // namespace loch::plan
