#include "plan/shape.hpp"

#include <algorithm>
#include <stdexcept>

#include <fmt/format.h>

namespace loch::plan {
namespace {

// A key that may be a scalar or a per-layer array (llama.cpp get_key_or_arr).
std::vector<std::uint32_t> per_layer(const gguf::Model& m, std::string_view suffix, std::uint32_t n_layer,
                                     std::uint32_t fallback) {
    std::vector<std::uint32_t> out(n_layer, fallback);
    const gguf::Value* v = m.arch_value(suffix);
    if (!v) return out;
    if (const auto* arr = v->as_array()) {
        if (arr->items.size() != n_layer)
            throw std::runtime_error(fmt::format("{}.{} has {} values for {} layers", m.architecture(),
                                                 suffix, arr->items.size(), n_layer));
        for (std::uint32_t i = 0; i < n_layer; ++i) {
            auto u = arr->items[i].as_uint();
            if (!u || *u > UINT32_MAX)
                throw std::runtime_error(
                    fmt::format("{}.{}[{}] is not a valid count", m.architecture(), suffix, i));
            out[i] = static_cast<std::uint32_t>(*u);
        }
        return out;
    }
    auto u = v->as_uint();
    if (!u || *u > UINT32_MAX)
        throw std::runtime_error(fmt::format("{}.{} is not a valid count", m.architecture(), suffix));
    std::fill(out.begin(), out.end(), static_cast<std::uint32_t>(*u));
    return out;
}

std::uint32_t get_u32(const gguf::Model& m, std::string_view suffix, std::optional<std::uint32_t> fallback) {
    auto v = m.arch_uint(suffix);
    if (!v) {
        if (fallback) return *fallback;
        throw std::runtime_error(fmt::format("{}.{} is missing", m.architecture(), suffix));
    }
    if (*v > UINT32_MAX)
        throw std::runtime_error(fmt::format("{}.{} = {} is too large", m.architecture(), suffix, *v));
    return static_cast<std::uint32_t>(*v);
}

}  // namespace

std::uint32_t ModelShape::n_embd_v_gqa_max() const {
    std::uint32_t m = 0;
    for (std::uint32_t il = 0; il < n_layer; ++il) m = std::max(m, n_embd_v_gqa(il));
    return m;
}

bool ModelShape::any_swa() const {
    return std::find(is_swa.begin(), is_swa.end(), true) != is_swa.end();
}

ModelShape shape_of(const gguf::Model& m) {
    ModelShape s;
    s.arch = m.architecture();
    if (s.arch.empty()) throw std::runtime_error("general.architecture is missing");
    s.n_layer = get_u32(m, "block_count", std::nullopt);
    if (s.n_layer == 0 || s.n_layer > 4096)
        throw std::runtime_error(fmt::format("block_count {} is out of range", s.n_layer));
    s.n_embd = get_u32(m, "embedding_length", std::nullopt);
    auto heads = per_layer(m, "attention.head_count", s.n_layer, 0);
    s.n_head = *std::max_element(heads.begin(), heads.end());
    if (s.n_head == 0)
        throw std::runtime_error(fmt::format("{}.attention.head_count is missing or 0", s.arch));
    s.n_head_kv = per_layer(m, "attention.head_count_kv", s.n_layer, s.n_head);
    s.head_k = get_u32(m, "attention.key_length", s.n_embd / s.n_head);
    s.head_v = get_u32(m, "attention.value_length", s.n_embd / s.n_head);
    auto ff = per_layer(m, "feed_forward_length", s.n_layer, 0);
    s.n_ff = *std::max_element(ff.begin(), ff.end());
    s.n_ctx_train = get_u32(m, "context_length", 0u);
    s.pooling_mean = get_u32(m, "pooling_type", 0u) == 1;  // llama.h: LLAMA_POOLING_TYPE_MEAN

    if (auto n = m.metadata.get_uint("tokenizer.ggml.vocab_size"); n)
        s.n_vocab = static_cast<std::uint32_t>(*n);
    if (auto n = m.arch_uint("vocab_size"); n) s.n_vocab = static_cast<std::uint32_t>(*n);
    if (const auto* toks = m.metadata.find("tokenizer.ggml.tokens"); toks && toks->as_array())
        s.n_vocab = static_cast<std::uint32_t>(toks->as_array()->items.size());
    else if (toks && toks->type == gguf::ValueType::UINT64)  // their count (gguf::for_planning)
        s.n_vocab = static_cast<std::uint32_t>(*toks->as_uint());
    if (s.n_vocab == 0) {
        if (const auto* t = m.find_tensor("token_embd.weight"); t && t->dims.size() >= 2)
            s.n_vocab = static_cast<std::uint32_t>(t->dims[1]);
    }

    s.n_expert = get_u32(m, "expert_count", 0u);
    s.n_expert_used = get_u32(m, "expert_used_count", 0u);
    s.n_ff_expert = get_u32(m, "expert_feed_forward_length", s.n_ff);
    s.n_expert_shared = get_u32(m, "expert_shared_count", 0u);
    s.n_layer_dense_lead = get_u32(m, "leading_dense_block_count", 0u);

    s.is_swa.assign(s.n_layer, false);
    s.n_swa = get_u32(m, "attention.sliding_window", 0u);
    if (s.n_swa > 0 && s.arch == "gemma3") {
        // llama_model_base::load_swa_pattern(ml, 6): an array of bools, or a period (every n-th layer
        // global).
        const gguf::Value* p = m.arch_value("attention.sliding_window_pattern");
        if (p && p->as_array()) {
            const auto& items = p->as_array()->items;
            for (std::uint32_t il = 0; il < s.n_layer && il < items.size(); ++il) {
                if (const bool* b = std::get_if<bool>(&items[il].data))
                    s.is_swa[il] = *b;
                else
                    s.is_swa[il] = items[il].as_uint().value_or(0) != 0;
            }
        } else {
            std::uint32_t n_pattern = p && p->as_uint() ? static_cast<std::uint32_t>(*p->as_uint()) : 6;
            for (std::uint32_t il = 0; il < s.n_layer; ++il)
                s.is_swa[il] = n_pattern == 0 || (il % n_pattern < n_pattern - 1);
        }
    } else {
        s.n_swa = 0;  // other architectures here have no iSWA cache
    }

    auto k_mla = m.arch_uint("attention.key_length_mla");
    auto v_mla = m.arch_uint("attention.value_length_mla");
    s.mla = k_mla && v_mla && *k_mla > 0 && *v_mla > 0;
    s.kv_lora_rank = get_u32(m, "attention.kv_lora_rank", 0u);

    s.qk_norm = m.find_tensor("blk.0.attn_q_norm.weight") != nullptr;
    s.tied_embeddings = m.find_tensor("output.weight") == nullptr;
    return s;
}

}  // namespace loch::plan
