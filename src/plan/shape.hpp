// plan/shape — the hyper-parameters the memory arithmetic needs, read from a GGUF model's metadata the way
// the pinned llama.cpp reads them (llama-model.cpp load_hparams, src/models/<arch>.cpp).
//
// Per-layer values are resolved here once (KV heads given as arrays, sliding-window layers, MLA), so the
// planner never looks at metadata keys itself.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "gguf/model.hpp"

namespace loch::plan {

struct ModelShape {
    std::string arch;
    std::uint32_t n_layer = 0;
    std::uint32_t n_embd = 0;
    std::uint32_t n_head = 0;
    std::vector<std::uint32_t> n_head_kv;  // per layer
    std::uint32_t head_k = 0;              // <arch>.attention.key_length (default n_embd / n_head)
    std::uint32_t head_v = 0;
    std::uint32_t n_ff = 0;  // dense FFN width (max over layers when given per layer)
    std::uint32_t n_vocab = 0;
    std::uint32_t n_ctx_train = 0;
    bool pooling_mean =
        false;  // <arch>.pooling_type = 1: the model's own pooling, when --pooling is not given
    // Mixture of experts.
    std::uint32_t n_expert = 0, n_expert_used = 0, n_ff_expert = 0, n_expert_shared = 0,
                  n_layer_dense_lead = 0;
    // Sliding window (gemma3): is_swa[il] layers keep only the window.
    std::uint32_t n_swa = 0;
    std::vector<bool> is_swa;
    // Multi-head latent attention (deepseek2 with key_length_mla): the cache holds one latent row per token.
    bool mla = false;
    std::uint32_t kv_lora_rank = 0;
    // Q and K normalised per head before RoPE (qwen3, gemma3: attn_q_norm): for qwen3, more Q- and K-sized
    // blocks in the attention's peak (plan/compute.cpp).
    bool qk_norm = false;
    bool tied_embeddings = false;  // no output.weight: llama.cpp duplicates token_embd onto the output device

    std::uint32_t n_embd_k_gqa(std::uint32_t il) const { return head_k * n_head_kv.at(il); }
    std::uint32_t n_embd_v_gqa(std::uint32_t il) const { return mla ? 0 : head_v * n_head_kv.at(il); }
    std::uint32_t n_embd_v_gqa_max() const;
    bool any_swa() const;
};

// Throws std::runtime_error naming the missing key, e.g. "llama.block_count is missing".
ModelShape shape_of(const gguf::Model& model);

}  // namespace loch::plan
