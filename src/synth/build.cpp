// build_model(): Shape + quantization → gguf::Model, tensor by tensor as the pinned llama.cpp creates
// them in src/models/<arch>.cpp (load_arch_tensors) and with the keys load_hparams()/load_arch_hparams()
// read. llama.cpp refuses a file with a tensor it did not ask for, so only tensors it creates are emitted.
#include <string>
#include <utility>
#include <vector>

#include <fmt/format.h>

#include "gguf/writer.hpp"
#include "synth/quant_rules.hpp"
#include "synth/synth.hpp"
#include "synth/vocab.hpp"

namespace loch::synth {

namespace {

using Dims = std::vector<std::uint64_t>;

class TensorList {
  public:
    // Weights (2-D/3-D) are quantizable unless they are norms or the expert router (llama-quant.cpp keeps
    // those, and every 1-D tensor, in F32).
    void add(std::string name, Dims dims) {
        const bool is_norm = name.find("_norm.weight") != std::string::npos;
        const bool is_router = name.find("ffn_gate_inp.weight") != std::string::npos;
        const bool is_weight = name.size() >= 6 && name.compare(name.size() - 6, 6, "weight") == 0;
        quantizable_.push_back(dims.size() >= 2 && is_weight && !is_norm && !is_router);
        gguf::TensorInfo t;
        t.name = std::move(name);
        t.dims = std::move(dims);
        tensors_.push_back(std::move(t));
    }
    void add_layer(std::uint32_t il, std::string_view suffix, Dims dims) {
        add(fmt::format("blk.{}.{}", il, suffix), std::move(dims));
    }
    std::vector<gguf::TensorInfo>& tensors() { return tensors_; }
    const std::vector<bool>& quantizable() const { return quantizable_; }

  private:
    std::vector<gguf::TensorInfo> tensors_;
    std::vector<bool> quantizable_;
};

void add_dense_ffn(TensorList& tl, std::uint32_t il, std::uint64_t E, std::uint64_t F) {
    tl.add_layer(il, "ffn_gate.weight", {E, F});
    tl.add_layer(il, "ffn_down.weight", {F, E});
    tl.add_layer(il, "ffn_up.weight", {E, F});
}

void add_experts(TensorList& tl, std::uint32_t il, std::uint64_t E, std::uint64_t Fe, std::uint64_t X) {
    tl.add_layer(il, "ffn_gate_inp.weight", {E, X});
    tl.add_layer(il, "ffn_gate_exps.weight", {E, Fe, X});
    tl.add_layer(il, "ffn_down_exps.weight", {Fe, E, X});
    tl.add_layer(il, "ffn_up_exps.weight", {E, Fe, X});
}

// llama, qwen2, qwen3, qwen3moe, gemma3: grouped-query attention with separate q/k/v.
void add_gqa_layer(TensorList& tl, const Shape& s, std::uint32_t il) {
    const std::uint64_t E = s.n_embd, hd = s.head_dim_or_default(), H = s.n_head, KV = s.kv_heads(il);
    const bool qk_norm = s.arch == "qwen3" || s.arch == "qwen3moe" || s.arch == "gemma3";
    tl.add_layer(il, "attn_norm.weight", {E});
    tl.add_layer(il, "attn_q.weight", {E, hd * H});
    tl.add_layer(il, "attn_k.weight", {E, hd * KV});
    tl.add_layer(il, "attn_v.weight", {E, hd * KV});
    if (s.attn_bias) {
        tl.add_layer(il, "attn_q.bias", {hd * H});
        tl.add_layer(il, "attn_k.bias", {hd * KV});
        tl.add_layer(il, "attn_v.bias", {hd * KV});
    }
    tl.add_layer(il, "attn_output.weight", {hd * H, E});
    if (qk_norm) {
        tl.add_layer(il, "attn_k_norm.weight", {hd});
        tl.add_layer(il, "attn_q_norm.weight", {hd});
    }
    if (s.arch == "gemma3") tl.add_layer(il, "post_attention_norm.weight", {E});
    tl.add_layer(il, "ffn_norm.weight", {E});
    if (s.n_expert > 0) {
        add_experts(tl, il, E, s.arch == "llama" ? s.n_ff : s.n_ff_expert_or_default(), s.n_expert);
    } else {
        add_dense_ffn(tl, il, E, s.n_ff);
    }
    if (s.arch == "gemma3") tl.add_layer(il, "post_ffw_norm.weight", {E});
}

// deepseek2: multi-head latent attention (split attn_k_b / attn_v_b, as current conversions write it).
void add_mla_layer(TensorList& tl, const Shape& s, std::uint32_t il) {
    const std::uint64_t E = s.n_embd, H = s.n_head, hd = s.head_dim_or_default(), rope = s.rope_dim;
    const std::uint64_t nope = hd - rope, vhd = s.v_head_dim ? s.v_head_dim : hd;
    const std::uint64_t qr = s.q_lora_rank, kvr = s.kv_lora_rank;
    tl.add_layer(il, "attn_norm.weight", {E});
    if (qr > 0) tl.add_layer(il, "attn_q_a_norm.weight", {qr});
    tl.add_layer(il, "attn_kv_a_norm.weight", {kvr});
    if (qr > 0) {
        tl.add_layer(il, "attn_q_a.weight", {E, qr});
        tl.add_layer(il, "attn_q_b.weight", {qr, H * hd});
    } else {
        tl.add_layer(il, "attn_q.weight", {E, H * hd});
    }
    tl.add_layer(il, "attn_kv_a_mqa.weight", {E, kvr + rope});
    tl.add_layer(il, "attn_k_b.weight", {nope, kvr, H});
    tl.add_layer(il, "attn_v_b.weight", {kvr, vhd, H});
    tl.add_layer(il, "attn_output.weight", {H * vhd, E});
    tl.add_layer(il, "ffn_norm.weight", {E});
    if (il < s.n_layer_dense_lead) {
        add_dense_ffn(tl, il, E, s.n_ff);
    } else {
        const std::uint64_t Fe = s.n_ff_expert_or_default(), X = s.n_expert, Fs = Fe * s.n_expert_shared;
        tl.add_layer(il, "ffn_gate_inp.weight", {E, X});
        tl.add_layer(il, "ffn_down_exps.weight", {Fe, E, X});
        tl.add_layer(il, "ffn_gate_exps.weight", {E, Fe, X});
        tl.add_layer(il, "ffn_up_exps.weight", {E, Fe, X});
        tl.add_layer(il, "ffn_gate_shexp.weight", {E, Fs});
        tl.add_layer(il, "ffn_down_shexp.weight", {Fs, E});
        tl.add_layer(il, "ffn_up_shexp.weight", {E, Fs});
    }
}

void add_hparams(gguf::Metadata& md, const Shape& s) {
    const std::string& a = s.arch;
    auto key = [&](std::string_view suffix) { return fmt::format("{}.{}", a, suffix); };
    const bool mla = a == "deepseek2";
    const std::uint32_t hd = s.head_dim_or_default();

    md.set(key("vocab_size"), gguf::Value::u32(s.n_vocab));
    md.set(key("context_length"), gguf::Value::u32(s.n_ctx_train));
    md.set(key("embedding_length"), gguf::Value::u32(s.n_embd));
    md.set(key("block_count"), gguf::Value::u32(s.n_layer));
    if (s.n_ff > 0) md.set(key("feed_forward_length"), gguf::Value::u32(s.n_ff));
    md.set(key("attention.head_count"), gguf::Value::u32(s.n_head));
    if (mla) {
        md.set(key("attention.head_count_kv"), gguf::Value::u32(1));
    } else if (s.n_head_kv.size() > 1) {
        std::vector<gguf::Value> kv;
        for (std::uint32_t il = 0; il < s.n_layer; ++il) kv.push_back(gguf::Value::u32(s.kv_heads(il)));
        md.set(key("attention.head_count_kv"), gguf::Value::array(gguf::ValueType::UINT32, std::move(kv)));
    } else {
        md.set(key("attention.head_count_kv"), gguf::Value::u32(s.kv_heads(0)));
    }
    md.set(key("rope.freq_base"), gguf::Value::f32(s.rope_freq_base));
    md.set(key("attention.layer_norm_rms_epsilon"), gguf::Value::f32(s.norm_eps));
    if (mla) {
        // The KV cache holds the compressed latent (kv_lora_rank) plus the shared rope part.
        md.set(key("attention.key_length"), gguf::Value::u32(s.kv_lora_rank + s.rope_dim));
        md.set(key("attention.value_length"), gguf::Value::u32(s.kv_lora_rank));
        md.set(key("attention.key_length_mla"), gguf::Value::u32(hd));
        md.set(key("attention.value_length_mla"), gguf::Value::u32(s.v_head_dim ? s.v_head_dim : hd));
        md.set(key("rope.dimension_count"), gguf::Value::u32(s.rope_dim));
        md.set(key("leading_dense_block_count"), gguf::Value::u32(s.n_layer_dense_lead));
        md.set(key("attention.q_lora_rank"), gguf::Value::u32(s.q_lora_rank));
        md.set(key("attention.kv_lora_rank"), gguf::Value::u32(s.kv_lora_rank));
        md.set(key("expert_shared_count"), gguf::Value::u32(s.n_expert_shared));
        md.set(key("expert_weights_scale"), gguf::Value::f32(1.0f));
        md.set(key("expert_weights_norm"), gguf::Value::boolean(false));
        md.set(key("expert_gating_func"), gguf::Value::u32(1));  // softmax
    } else {
        md.set(key("attention.key_length"), gguf::Value::u32(hd));
        md.set(key("attention.value_length"), gguf::Value::u32(hd));
        md.set(key("rope.dimension_count"), gguf::Value::u32(hd));
    }
    if (s.n_expert > 0) {
        md.set(key("expert_count"), gguf::Value::u32(s.n_expert));
        md.set(key("expert_used_count"), gguf::Value::u32(s.n_expert_used));
        if (a != "llama")
            md.set(key("expert_feed_forward_length"), gguf::Value::u32(s.n_ff_expert_or_default()));
    }
    if (s.sliding_window > 0) {
        md.set(key("attention.sliding_window"), gguf::Value::u32(s.sliding_window));
        md.set(key("attention.sliding_window_pattern"), gguf::Value::u32(s.swa_pattern));
        md.set(key("rope.freq_base_swa"), gguf::Value::f32(s.rope_freq_base_swa));
    }
}

}  // namespace

gguf::Model build_model(const Shape& shape, std::string_view quant) {
    validate(shape);
    const auto spec = detail::parse_quant(quant);
    if (!spec) {
        std::string known;
        for (const auto& q : quant_names()) known += (known.empty() ? "" : ", ") + q;
        throw SynthError(fmt::format("unknown quantization '{}' (known: {})", quant, known));
    }

    gguf::Model model;
    auto& md = model.metadata;
    md.set("general.architecture", gguf::Value::str(shape.arch));
    md.set("general.name", gguf::Value::str(shape.name.empty() ? "synth-" + shape.arch : shape.name));
    md.set("general.file_type", gguf::Value::u32(spec->file_type));
    if (gguf::traits(spec->base).quantized) md.set("general.quantization_version", gguf::Value::u32(2));
    add_hparams(md, shape);
    detail::add_vocab(md, shape.n_vocab);

    TensorList tl;
    const std::uint64_t E = shape.n_embd, V = shape.n_vocab;
    tl.add("token_embd.weight", {E, V});
    tl.add("output_norm.weight", {E});
    if (!shape.tied_embeddings) tl.add("output.weight", {E, V});
    for (std::uint32_t il = 0; il < shape.n_layer; ++il) {
        if (shape.arch == "deepseek2") {
            add_mla_layer(tl, shape, il);
        } else {
            add_gqa_layer(tl, shape, il);
        }
    }
    detail::assign_types(tl.tensors(), tl.quantizable(), shape, *spec);
    model.tensors = std::move(tl.tensors());
    lay_out(model);
    return model;
}

void lay_out(gguf::Model& model) {
    try {
        // One layout pass (it serializes the header, vocabulary included): offsets and size together.
        const auto layout = gguf::layout(model);
        for (std::size_t i = 0; i < model.tensors.size(); ++i)
            model.tensors[i].offset = layout.tensor_offsets[i];
        model.file_size = layout.file_size;
    } catch (const std::invalid_argument& e) {
        throw SynthError(fmt::format("cannot lay out the model: {}", e.what()));
    }
}

}  // namespace loch::synth
