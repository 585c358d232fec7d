// Tensor type selection, a transcription of llama_tensor_get_type_impl() and tensor_type_fallback() in
// llama-quant.cpp (pinned de3ff81) for the non-imatrix file types loch-synth offers. Keeping the mix real
// matters: the planner's byte counts per tensor and per layer must look like a real Q4_K_M file's.
#include <algorithm>
#include <array>
#include <cctype>
#include <string>

#include <fmt/format.h>

#include "core/text.hpp"
#include "synth/quant_rules.hpp"

namespace loch::synth {

namespace detail {

namespace {

using gguf::GgmlType;

// llama_ftype values of llama.h.
enum Ftype : std::uint32_t {
    kF32 = 0,
    kF16 = 1,
    kQ4_0 = 2,
    kQ4_1 = 3,
    kQ8_0 = 7,
    kQ5_0 = 8,
    kQ5_1 = 9,
    kQ2_K = 10,
    kQ3_K_S = 11,
    kQ3_K_M = 12,
    kQ3_K_L = 13,
    kQ4_K_S = 14,
    kQ4_K_M = 15,
    kQ5_K_S = 16,
    kQ5_K_M = 17,
    kQ6_K = 18,
    kBF16 = 32,
};

struct NamedQuant {
    std::string_view name;
    QuantSpec spec;
};

// File types first (mixing rules apply), then plain K-quant tensor types (pure).
constexpr std::array<NamedQuant, 20> kQuants = {{
    {"f32", {kF32, GgmlType::F32, false}},        {"f16", {kF16, GgmlType::F16, false}},
    {"bf16", {kBF16, GgmlType::BF16, false}},     {"q8_0", {kQ8_0, GgmlType::Q8_0, false}},
    {"q4_0", {kQ4_0, GgmlType::Q4_0, false}},     {"q4_1", {kQ4_1, GgmlType::Q4_1, false}},
    {"q5_0", {kQ5_0, GgmlType::Q5_0, false}},     {"q5_1", {kQ5_1, GgmlType::Q5_1, false}},
    {"q2_k", {kQ2_K, GgmlType::Q2_K, false}},     {"q3_k_s", {kQ3_K_S, GgmlType::Q3_K, false}},
    {"q3_k_m", {kQ3_K_M, GgmlType::Q3_K, false}}, {"q3_k_l", {kQ3_K_L, GgmlType::Q3_K, false}},
    {"q4_k_s", {kQ4_K_S, GgmlType::Q4_K, false}}, {"q4_k_m", {kQ4_K_M, GgmlType::Q4_K, false}},
    {"q5_k_s", {kQ5_K_S, GgmlType::Q5_K, false}}, {"q5_k_m", {kQ5_K_M, GgmlType::Q5_K, false}},
    {"q6_k", {kQ6_K, GgmlType::Q6_K, false}},     {"q3_k", {kQ3_K_M, GgmlType::Q3_K, true}},
    {"q4_k", {kQ4_K_M, GgmlType::Q4_K, true}},    {"q5_k", {kQ5_K_M, GgmlType::Q5_K, true}},
}};

enum class Category {
    token_embd,
    output,
    attn_v,
    attn_k,
    attn_q,
    attn_output,
    ffn_up,
    ffn_gate,
    ffn_down,
    other
};

bool contains(const std::string& s, std::string_view part) {
    return s.find(part) != std::string::npos;
}

// tensor_get_category() of llama-quant.cpp, restricted to the names build_model() emits.
Category category_of(const std::string& name) {
    if (name == "output.weight") return Category::output;
    if (name == "token_embd.weight") return Category::token_embd;
    if (contains(name, "attn_qkv.weight") || contains(name, "attn_kv_b.weight") ||
        contains(name, "attn_v.weight")) {
        return Category::attn_v;
    }
    if (contains(name, "attn_k.weight")) return Category::attn_k;
    if (contains(name, "attn_q.weight")) return Category::attn_q;
    if (contains(name, "attn_output.weight")) return Category::attn_output;
    if (contains(name, "ffn_up")) return Category::ffn_up;
    if (contains(name, "ffn_gate")) return Category::ffn_gate;
    if (contains(name, "ffn_down")) return Category::ffn_down;
    return Category::other;
}

int layer_of(const std::string& name) {
    int layer = -1;
    if (name.rfind("blk.", 0) == 0) layer = std::stoi(name.substr(4));
    return layer;
}

bool use_more_bits(int i_layer, int n_layers) {
    return i_layer < n_layers / 8 || i_layer >= 7 * n_layers / 8 || (i_layer - n_layers / 8) % 3 == 2;
}

std::uint32_t block_of(GgmlType t) {
    return gguf::traits(t).block_size;
}

// tensor_type_fallback(): a row must be a whole number of blocks.
GgmlType fallback(GgmlType t, std::uint64_t ncols) {
    if (ncols % block_of(t) == 0) return t;
    GgmlType r = t;
    switch (t) {
        case GgmlType::Q2_K:
        case GgmlType::Q3_K:
            r = GgmlType::Q4_0;
            break;
        case GgmlType::Q4_K:
            r = GgmlType::Q5_0;
            break;
        case GgmlType::Q5_K:
            r = GgmlType::Q5_1;
            break;
        case GgmlType::Q6_K:
            r = GgmlType::Q8_0;
            break;
        default:
            break;
    }
    if (ncols % block_of(r) != 0) r = GgmlType::F16;
    return r;
}

struct Counters {
    int n_attention_wv = 0;
    int i_attention_wv = 0;
};

GgmlType mixed_type(const gguf::TensorInfo& t, Category cat, const Shape& s, const QuantSpec& spec, bool tied,
                    Counters& c) {
    const std::uint32_t ft = spec.file_type;
    GgmlType nt = spec.base;
    const int n_layer = static_cast<int>(s.n_layer);
    const std::uint32_t n_expert = s.n_expert;
    const bool mla = s.arch == "deepseek2";
    const std::uint32_t n_gqa = mla ? s.n_head : s.n_head / std::max<std::uint32_t>(1, s.kv_heads(0));
    const bool is_70b = (s.arch == "llama" && n_layer == 80 && s.n_head != s.kv_heads(0)) ||
                        (s.arch == "qwen2" && n_layer == 80);

    if (cat == Category::output || (tied && cat == Category::token_embd)) {
        if (t.dims[0] % block_of(nt) != 0) {
            nt = GgmlType::Q8_0;
        } else if (nt != GgmlType::Q8_0) {
            nt = GgmlType::Q6_K;
        }
    } else if (cat == Category::token_embd) {
        // the file type's base type
    } else if (cat == Category::attn_v) {
        if (ft == kQ2_K) {
            nt = n_gqa >= 4 ? GgmlType::Q4_K : GgmlType::Q3_K;
        } else if (ft == kQ3_K_M) {
            nt = c.i_attention_wv < 2 ? GgmlType::Q5_K : GgmlType::Q4_K;
        } else if (ft == kQ3_K_L) {
            nt = GgmlType::Q5_K;
        } else if ((ft == kQ4_K_M || ft == kQ5_K_M) && use_more_bits(c.i_attention_wv, c.n_attention_wv)) {
            nt = GgmlType::Q6_K;
        } else if (ft == kQ4_K_S && c.i_attention_wv < 4) {
            nt = GgmlType::Q5_K;
        }
        if (is_70b && (nt == GgmlType::Q3_K || nt == GgmlType::Q4_K)) nt = GgmlType::Q5_K;
        if (n_expert == 8) nt = GgmlType::Q8_0;
        ++c.i_attention_wv;
    } else if (cat == Category::attn_k) {
        if (n_expert == 8) nt = GgmlType::Q8_0;
    } else if (cat == Category::ffn_down) {
        const int il = layer_of(t.name);
        if (ft == kQ2_K) {
            nt = GgmlType::Q3_K;
        } else if (ft == kQ3_K_M) {
            nt = il < n_layer / 16 ? GgmlType::Q5_K : GgmlType::Q4_K;
        } else if (ft == kQ3_K_L) {
            nt = GgmlType::Q5_K;
        } else if (ft == kQ4_K_M) {
            if (use_more_bits(il, n_layer)) nt = GgmlType::Q6_K;
        } else if (ft == kQ5_K_M && use_more_bits(il, n_layer)) {
            nt = GgmlType::Q6_K;
        } else if (ft == kQ4_K_S && il < n_layer / 8) {
            nt = GgmlType::Q5_K;
        }
    } else if (cat == Category::attn_output) {
        if (n_expert == 8) {
            if (ft == kQ2_K || ft == kQ3_K_S || ft == kQ3_K_M || ft == kQ4_K_S || ft == kQ4_K_M)
                nt = GgmlType::Q5_K;
        } else {
            if (ft == kQ2_K)
                nt = GgmlType::Q3_K;
            else if (ft == kQ3_K_M)
                nt = GgmlType::Q4_K;
            else if (ft == kQ3_K_L)
                nt = GgmlType::Q5_K;
        }
    }
    return nt;
}

}  // namespace

std::optional<QuantSpec> parse_quant(std::string_view name) {
    const std::string lower = core::ascii_lower(name);
    for (const auto& q : kQuants) {
        if (q.name == lower) return q.spec;
    }
    return std::nullopt;
}

void assign_types(std::vector<gguf::TensorInfo>& tensors, const std::vector<bool>& quantizable,
                  const Shape& shape, const QuantSpec& spec) {
    const bool quantized = gguf::traits(spec.base).quantized;
    bool tied = true;
    Counters c;
    for (const auto& t : tensors) {
        if (category_of(t.name) == Category::attn_v) ++c.n_attention_wv;
        if (t.name == "output.weight") tied = false;
    }
    for (std::size_t i = 0; i < tensors.size(); ++i) {
        auto& t = tensors[i];
        if (!quantizable[i]) {
            t.type = GgmlType::F32;
            continue;
        }
        if (!quantized) {
            t.type = spec.base;
            continue;
        }
        GgmlType nt = spec.base;
        if (!spec.pure) nt = mixed_type(t, category_of(t.name), shape, spec, tied, c);
        t.type = fallback(nt, t.dims[0]);
    }
}

}  // namespace detail

const std::vector<std::string>& quant_names() {
    static const std::vector<std::string> kNames = [] {
        std::vector<std::string> v;
        for (const auto& q : detail::kQuants) v.emplace_back(q.name);
        return v;
    }();
    return kNames;
}

bool is_known_quant(std::string_view quant) {
    return detail::parse_quant(quant).has_value();
}

}  // namespace loch::synth
