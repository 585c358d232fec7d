// Shape checks: everything build_model() needs to hold before it computes a single tensor dimension, so
// that llama.cpp never sees a file it would reject (or assert on) and the user gets the numbers instead.
#include <algorithm>
#include <cmath>
#include <string>

#include <fmt/format.h>

#include "synth/synth.hpp"

namespace loch::synth {

namespace {

// Limits of the pinned llama.cpp (llama-hparams.h) and sane ceilings that keep every product in uint64.
constexpr std::uint32_t kMaxLayers = 512;
constexpr std::uint32_t kMaxExperts = 1024;
constexpr std::uint32_t kMaxDim = 1u << 20;
constexpr std::uint32_t kMaxVocab = 1u << 21;
constexpr std::uint32_t kMinVocab = 259;  // <unk>, <s>, </s> and the 256 byte tokens

[[noreturn]] void fail(const std::string& msg) {
    throw SynthError(msg);
}

void require_range(const char* what, std::uint64_t v, std::uint64_t lo, std::uint64_t hi) {
    if (v < lo || v > hi) fail(fmt::format("{} {} is out of range [{}, {}]", what, v, lo, hi));
}

}  // namespace

const std::vector<std::string>& architectures() {
    static const std::vector<std::string> kArchs = {"llama",    "qwen2",  "qwen3",
                                                    "qwen3moe", "gemma3", "deepseek2"};
    return kArchs;
}

std::uint32_t Shape::kv_heads(std::uint32_t layer) const {
    if (n_head_kv.empty()) return n_head;
    if (n_head_kv.size() == 1) return n_head_kv[0];
    return layer < n_head_kv.size() ? n_head_kv[layer] : 0;
}

void validate(const Shape& s) {
    const auto& archs = architectures();
    if (std::find(archs.begin(), archs.end(), s.arch) == archs.end()) {
        std::string known;
        for (const auto& a : archs) known += (known.empty() ? "" : ", ") + a;
        fail(fmt::format("unknown architecture '{}' (known: {})", s.arch, known));
    }
    const bool mla = s.arch == "deepseek2";

    require_range("n_layer", s.n_layer, 1, kMaxLayers);
    require_range("n_embd", s.n_embd, 1, kMaxDim);
    require_range("n_head", s.n_head, 1, kMaxDim);
    require_range("n_vocab", s.n_vocab, kMinVocab, kMaxVocab);
    require_range("n_ctx_train", s.n_ctx_train, 1, std::uint64_t{1} << 24);

    if (s.head_dim == 0 && s.n_embd % s.n_head != 0) {
        fail(fmt::format("n_embd {} is not divisible by n_head {} (set head_dim to decouple them)", s.n_embd,
                         s.n_head));
    }
    const std::uint32_t hd = s.head_dim_or_default();
    require_range("head_dim", hd, 2, 4096);
    if (hd % 2 != 0) fail(fmt::format("head_dim {} must be even (rotary embedding works on pairs)", hd));

    if (!s.n_head_kv.empty() && s.n_head_kv.size() != 1 && s.n_head_kv.size() != s.n_layer) {
        fail(fmt::format("n_head_kv has {} values; give one, or one per layer ({})", s.n_head_kv.size(),
                         s.n_layer));
    }
    if (!mla) {
        for (std::uint32_t il = 0; il < s.n_layer; ++il) {
            const std::uint32_t kv = s.kv_heads(il);
            if (kv == 0 || kv > s.n_head || s.n_head % kv != 0) {
                fail(fmt::format("n_head_kv {} (layer {}) must divide n_head {}", kv, il, s.n_head));
            }
        }
        // The loaders of these architectures size every layer's K/V projections from layer 0
        // (LLAMA_LOAD_LOCALS: n_embd_k_gqa()), so a file with differing layers would not load.
        for (std::uint32_t il = 1; il < s.n_layer; ++il) {
            if (s.kv_heads(il) != s.kv_heads(0)) {
                fail(fmt::format(
                    "n_head_kv differs per layer (layer 0: {}, layer {}: {}): llama.cpp's {} loader sizes "
                    "every layer from layer 0",
                    s.kv_heads(0), il, s.kv_heads(il), s.arch));
            }
        }
    } else if (!s.n_head_kv.empty() && !(s.n_head_kv.size() == 1 && s.n_head_kv[0] == 1)) {
        fail("deepseek2 uses latent attention: n_head_kv is implied (1), do not set it");
    }

    if (s.arch == "qwen2" && std::uint64_t{hd} * s.n_head != s.n_embd) {
        fail(fmt::format(
            "qwen2 needs head_dim * n_head == n_embd (attn_output is n_embd x n_embd): {} * {} != {}", hd,
            s.n_head, s.n_embd));
    }

    // Feed-forward widths.
    const bool moe_arch = s.arch == "qwen3moe" || mla;
    const bool has_dense_ffn = !moe_arch || (mla && s.n_layer_dense_lead > 0);
    if (has_dense_ffn) require_range("n_ff", s.n_ff, 1, kMaxDim);
    if (s.n_ff > kMaxDim) require_range("n_ff", s.n_ff, 0, kMaxDim);

    // Experts.
    if (s.n_expert > 0) {
        if (s.arch != "llama" && !moe_arch) {
            fail(fmt::format("architecture {} has no experts in llama.cpp (use qwen3moe, deepseek2 or llama)",
                             s.arch));
        }
        require_range("n_expert", s.n_expert, 2, kMaxExperts);
        if (s.n_expert_used == 0 || s.n_expert_used > s.n_expert) {
            fail(fmt::format("n_expert_used {} must be in [1, n_expert {}]", s.n_expert_used, s.n_expert));
        }
        require_range("n_ff_expert", s.n_ff_expert_or_default(), 1, kMaxDim);
    } else {
        if (moe_arch)
            fail(fmt::format("{} is a mixture-of-experts architecture: set n_expert and n_expert_used",
                             s.arch));
        if (s.n_expert_used != 0)
            fail(fmt::format("n_expert_used {} without experts (n_expert 0)", s.n_expert_used));
    }
    if (s.arch == "llama" && s.n_ff_expert != 0 && s.n_ff_expert != s.n_ff) {
        fail(fmt::format("llama experts are n_ff ({}) wide: n_ff_expert {} must be 0 or equal", s.n_ff,
                         s.n_ff_expert));
    }
    if (mla && s.n_layer_dense_lead < s.n_layer && s.n_expert_shared == 0) {
        fail("deepseek2 MoE layers need at least one shared expert (n_expert_shared >= 1)");
    }
    if (s.n_expert_shared > 0 && !mla) fail("shared experts are only modelled for deepseek2");
    if (s.n_layer_dense_lead > 0 && !mla) fail("leading dense layers are only modelled for deepseek2");
    if (s.n_layer_dense_lead > s.n_layer) {
        fail(fmt::format("n_layer_dense_lead {} exceeds n_layer {}", s.n_layer_dense_lead, s.n_layer));
    }

    // Sliding window.
    if (s.sliding_window > 0 && s.arch != "gemma3") {
        fail(fmt::format("sliding-window attention is only modelled for gemma3, not {}", s.arch));
    }
    if (s.swa_pattern > s.n_layer)
        fail(fmt::format("swa_pattern {} exceeds n_layer {}", s.swa_pattern, s.n_layer));

    // Latent attention.
    if (mla) {
        require_range("kv_lora_rank", s.kv_lora_rank, 1, kMaxDim);
        require_range("rope_dim", s.rope_dim, 2, 4096);
        if (s.rope_dim % 2 != 0) fail(fmt::format("rope_dim {} must be even", s.rope_dim));
        if (s.rope_dim >= hd) {
            fail(fmt::format("deepseek2 head_dim {} must exceed rope_dim {} (the rest is the no-rope part)",
                             hd, s.rope_dim));
        }
        require_range("v_head_dim", s.v_head_dim ? s.v_head_dim : hd, 1, 4096);
    } else {
        if (s.q_lora_rank || s.kv_lora_rank)
            fail(fmt::format("q/kv LoRA ranks are latent attention (deepseek2), not {}", s.arch));
        if (s.rope_dim != 0 && s.rope_dim != hd) {
            fail(fmt::format("rope_dim {} must equal head_dim {} for {}", s.rope_dim, hd, s.arch));
        }
        if (s.v_head_dim != 0 && s.v_head_dim != hd) {
            fail(fmt::format("v_head_dim {} must equal head_dim {} for {}", s.v_head_dim, hd, s.arch));
        }
    }

    if (!(s.norm_eps > 0.0f) || !std::isfinite(s.norm_eps))
        fail(fmt::format("norm_eps {} must be > 0", s.norm_eps));
    if (!(s.rope_freq_base > 0.0f) || !std::isfinite(s.rope_freq_base)) {
        fail(fmt::format("rope_freq_base {} must be > 0", s.rope_freq_base));
    }
    if (s.attn_bias && s.arch != "qwen2" && s.arch != "llama")
        fail(fmt::format("q/k/v biases are not modelled for {}", s.arch));
}

}  // namespace loch::synth
