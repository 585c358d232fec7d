#include "synth/projector.hpp"

#include <fmt/format.h>

#include "synth/synth.hpp"

namespace loch::synth {

namespace {

using gguf::GgmlType;
using gguf::Value;
using gguf::ValueType;

void add(gguf::Model& m, std::string name, std::vector<std::uint64_t> dims, GgmlType type) {
    gguf::TensorInfo t;
    t.name = std::move(name);
    t.dims = std::move(dims);
    t.type = type;
    m.tensors.push_back(std::move(t));
}

// A Linear in ggml order ([in, out]); rows that are not whole blocks of `type` stay f16, as the converter's.
void linear(gguf::Model& m, const std::string& name, std::uint64_t in, std::uint64_t out, GgmlType type) {
    add(m, name + ".weight", {in, out}, in % gguf::traits(type).block_size == 0 ? type : GgmlType::F16);
    add(m, name + ".bias", {out}, GgmlType::F32);
}

void norm(gguf::Model& m, const std::string& name, std::uint64_t n) {
    add(m, name + ".weight", {n}, GgmlType::F32);
    add(m, name + ".bias", {n}, GgmlType::F32);
}

Value f32_array(std::initializer_list<float> v) {
    std::vector<Value> items;
    for (float f : v) items.push_back(Value::f32(f));
    return Value::array(ValueType::FLOAT32, std::move(items));
}

}  // namespace

const std::vector<ProjectorPreset>& projector_presets() {
    static const std::vector<ProjectorPreset> presets = {
        {"llava-1.5", "LLaVA 1.5 projector: CLIP ViT-L/14 at 336 px (576 image tokens), MLP to 4096", {}},
        {"llava-tiny", "A tiny LLaVA-style projector for tests: 56 px in 14 px patches (16 image tokens)",
         ProjectorShape{56, 14, 64, 4, 256, 2, 64, 1e-5f}},
    };
    return presets;
}

const ProjectorPreset* find_projector_preset(std::string_view name) {
    for (const auto& p : projector_presets())
        if (p.name == name) return &p;
    return nullptr;
}

gguf::Model build_projector(const ProjectorShape& s, GgmlType weight_type) {
    if (s.patch_size == 0 || s.image_size == 0 || s.image_size % s.patch_size != 0)
        throw SynthError(fmt::format("mmproj: image size {} is not a whole number of {} px patches",
                                     s.image_size, s.patch_size));
    if (s.n_head == 0 || s.n_embd == 0 || s.n_embd % s.n_head != 0)
        throw SynthError(fmt::format("mmproj: width {} is not divisible by {} heads", s.n_embd, s.n_head));
    if (s.n_layer < 2)
        throw SynthError("mmproj: at least 2 blocks (LLaVA takes the second-to-last block's output)");
    if (s.n_ff == 0 || s.text_embd == 0) throw SynthError("mmproj: feed-forward and text widths must be > 0");

    gguf::Model m;
    auto& kv = m.metadata;
    kv.set("general.architecture", Value::str("clip"));
    kv.set("general.name", Value::str("synth-mmproj"));
    kv.set("general.description", Value::str("loch-synth mmproj: zero weights"));
    kv.set("general.file_type", Value::u32(weight_type == GgmlType::F32 ? 0 : 1));
    kv.set("clip.has_vision_encoder", Value::boolean(true));
    kv.set("clip.projector_type", Value::str("mlp"));
    kv.set("clip.use_gelu", Value::boolean(false));  // CLIP's quick GELU
    kv.set("clip.vision.image_size", Value::u32(s.image_size));
    kv.set("clip.vision.patch_size", Value::u32(s.patch_size));
    kv.set("clip.vision.embedding_length", Value::u32(s.n_embd));
    kv.set("clip.vision.feed_forward_length", Value::u32(s.n_ff));
    kv.set("clip.vision.projection_dim", Value::u32(s.text_embd));
    kv.set("clip.vision.attention.head_count", Value::u32(s.n_head));
    kv.set("clip.vision.attention.layer_norm_epsilon", Value::f32(s.eps));
    kv.set("clip.vision.block_count", Value::u32(s.n_layer));
    kv.set("clip.vision.image_mean", f32_array({0.48145466f, 0.4578275f, 0.40821073f}));
    kv.set("clip.vision.image_std", f32_array({0.26862954f, 0.26130258f, 0.27577711f}));

    const std::uint64_t e = s.n_embd;
    add(m, "v.class_embd", {e}, GgmlType::F32);
    add(m, "v.patch_embd.weight", {s.patch_size, s.patch_size, 3, e},
        GgmlType::F16);  // conv [kw, kh, in, out]
    add(m, "v.position_embd.weight", {e, std::uint64_t{s.patches()} + 1}, GgmlType::F16);
    norm(m, "v.pre_ln", e);
    for (std::uint32_t i = 0; i < s.n_layer; ++i) {
        const auto p = fmt::format("v.blk.{}.", i);
        for (const char* w : {"attn_q", "attn_k", "attn_v", "attn_out"}) linear(m, p + w, e, e, weight_type);
        norm(m, p + "ln1", e);
        linear(m, p + "ffn_up", e, s.n_ff, weight_type);
        linear(m, p + "ffn_down", s.n_ff, e, weight_type);
        norm(m, p + "ln2", e);
    }
    linear(m, "mm.0", e, s.text_embd, weight_type);
    linear(m, "mm.2", s.text_embd, s.text_embd, weight_type);
    lay_out(m);
    return m;
}

}  // namespace loch::synth
