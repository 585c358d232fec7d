#include "synth/diffusion.hpp"

#include <fmt/format.h>

#include "gguf/writer.hpp"
#include "synth/synth.hpp"

namespace loch::synth {

namespace {

using gguf::GgmlType;

// Tensors in sd.cpp's block terms. ggml order: a Linear's weight is [in, out], a Conv2d's [kw, kh, in, out].
class Tensors {
  public:
    explicit Tensors(GgmlType weight_type) : weight_type_(weight_type) {}
    void linear(const std::string& name, std::uint64_t in, std::uint64_t out, bool bias = true) {
        // A block-quantized type needs rows that are whole blocks; otherwise f16 (as sd.cpp's converter
        // does).
        const auto& t = gguf::traits(weight_type_);
        add(name + ".weight", {in, out}, in % t.block_size == 0 ? weight_type_ : GgmlType::F16);
        if (bias) add(name + ".bias", {out}, GgmlType::F32);
    }
    void conv(const std::string& name, std::uint64_t in, std::uint64_t out, std::uint64_t k,
              bool bias = true) {
        add(name + ".weight", {k, k, in, out}, GgmlType::F16);  // sd.cpp keeps convolutions in f16
        if (bias) add(name + ".bias", {out}, GgmlType::F32);
    }
    void norm(const std::string& name, std::uint64_t n) {  // LayerNorm / GroupNorm: weight and bias
        add(name + ".weight", {n}, GgmlType::F32);
        add(name + ".bias", {n}, GgmlType::F32);
    }
    void add(std::string name, std::vector<std::uint64_t> dims, GgmlType type) {
        gguf::TensorInfo t;
        t.name = std::move(name);
        t.dims = std::move(dims);
        t.type = type;
        list_.push_back(std::move(t));
    }
    std::vector<gguf::TensorInfo>& list() { return list_; }

  private:
    GgmlType weight_type_;
    std::vector<gguf::TensorInfo> list_;
};

// flux.hpp: Flux (not Flux.2): in/out 64 channels (2x2 patches of 16 latent channels), vec 768, MLP ratio 4,
// head size 128 (RoPE axes 16 + 56 + 56); depth, width, context width and guidance read from the file.
void flux(Tensors& t, const FluxShape& s) {
    const std::uint64_t h = s.hidden, mlp = 4ull * s.hidden, head = 128;
    if (s.hidden == 0 || s.hidden % head != 0)
        throw SynthError(
            fmt::format("flux: hidden {} must be a positive multiple of 128 (sd.cpp's head size)", s.hidden));
    if (s.depth == 0) throw SynthError("flux: at least one double block");
    t.linear("img_in", 64, h);
    t.linear("time_in.in_layer", 256, h);
    t.linear("time_in.out_layer", h, h);
    t.linear("vector_in.in_layer", 768, h);
    t.linear("vector_in.out_layer", h, h);
    if (s.guidance) {
        t.linear("guidance_in.in_layer", 256, h);
        t.linear("guidance_in.out_layer", h, h);
    }
    t.linear("txt_in", s.context_dim, h);
    for (std::uint32_t i = 0; i < s.depth; ++i)
        for (const char* stream : {"img", "txt"}) {
            const auto p = fmt::format("double_blocks.{}.{}_", i, stream);
            t.linear(p + "mod.lin", h, 6 * h);
            t.linear(p + "attn.qkv", h, 3 * h);
            t.add(p + "attn.norm.query_norm.scale", {head}, GgmlType::F32);
            t.add(p + "attn.norm.key_norm.scale", {head}, GgmlType::F32);
            t.linear(p + "attn.proj", h, h);
            t.linear(p + "mlp.0", h, mlp);
            t.linear(p + "mlp.2", mlp, h);
        }
    for (std::uint32_t i = 0; i < s.depth_single; ++i) {
        const auto p = fmt::format("single_blocks.{}.", i);
        t.linear(p + "linear1", h, 3 * h + mlp);
        t.linear(p + "linear2", h + mlp, h);
        t.add(p + "norm.query_norm.scale", {head}, GgmlType::F32);
        t.add(p + "norm.key_norm.scale", {head}, GgmlType::F32);
        t.linear(p + "modulation.lin", h, 3 * h);
    }
    t.linear("final_layer.linear", h, 64);
    t.linear("final_layer.adaLN_modulation.1", h, 2 * h);
}

// flux.hpp, Flux.2 (sd_version_is_flux2): in/out 128 channels (patch 1), no bias anywhere, no vector_in,
// MLP ratio 3 with a SiLU-gated first layer (2 × 3h wide), one modulation shared by all blocks
// (double_stream_modulation_img/txt, single_stream_modulation: what sd.cpp detects Flux.2 by), head size
// 128. sd.cpp tells Flux.2-dev (Mistral text encoder) from Flux.2 Klein (Qwen3) by single_blocks.47: dev
// needs 48 single blocks. Depth, width, context width and guidance are read from the file.
void flux2(Tensors& t, const FluxShape& s) {
    const std::uint64_t h = s.hidden, mlp = 3ull * s.hidden, head = 128;
    if (s.hidden == 0 || s.hidden % head != 0)
        throw SynthError(fmt::format(
            "flux2: hidden {} must be a positive multiple of 128 (sd.cpp's head size)", s.hidden));
    if (s.depth == 0) throw SynthError("flux2: at least one double block");
    if (s.depth_single < 48)
        throw SynthError(
            fmt::format("flux2: {} single blocks; sd.cpp reads fewer than 48 as Flux.2 Klein, "
                        "whose text encoder is Qwen3, not Mistral",
                        s.depth_single));
    t.linear("img_in", 128, h, false);
    t.linear("time_in.in_layer", 256, h, false);
    t.linear("time_in.out_layer", h, h, false);
    if (s.guidance) {
        t.linear("guidance_in.in_layer", 256, h, false);
        t.linear("guidance_in.out_layer", h, h, false);
    }
    t.linear("txt_in", s.context_dim, h, false);
    t.linear("double_stream_modulation_img.lin", h, 6 * h, false);
    t.linear("double_stream_modulation_txt.lin", h, 6 * h, false);
    t.linear("single_stream_modulation.lin", h, 3 * h, false);
    for (std::uint32_t i = 0; i < s.depth; ++i)
        for (const char* stream : {"img", "txt"}) {
            const auto p = fmt::format("double_blocks.{}.{}_", i, stream);
            t.linear(p + "attn.qkv", h, 3 * h, false);
            t.add(p + "attn.norm.query_norm.scale", {head}, GgmlType::F32);
            t.add(p + "attn.norm.key_norm.scale", {head}, GgmlType::F32);
            t.linear(p + "attn.proj", h, h, false);
            t.linear(p + "mlp.0", h, 2 * mlp, false);
            t.linear(p + "mlp.2", mlp, h, false);
        }
    for (std::uint32_t i = 0; i < s.depth_single; ++i) {
        const auto p = fmt::format("single_blocks.{}.", i);
        t.linear(p + "linear1", h, 3 * h + 2 * mlp, false);
        t.linear(p + "linear2", h + mlp, h, false);
        t.add(p + "norm.query_norm.scale", {head}, GgmlType::F32);
        t.add(p + "norm.key_norm.scale", {head}, GgmlType::F32);
    }
    t.linear("final_layer.linear", h, 128, false);
    t.linear("final_layer.adaLN_modulation.1", h, 2 * h, false);
}

// clip.hpp: OpenAI CLIP ViT-L/14's text model, fixed in sd.cpp: 12 layers, width 768, 12 heads, MLP 3072,
// 77 positions, vocabulary 49408. Names as Hugging Face writes them (sd.cpp adds its prefix).
void clip_l(Tensors& t, const std::string& prefix = "") {
    constexpr std::uint64_t d = 768, ff = 3072;
    t.add(prefix + "text_model.embeddings.token_embedding.weight", {d, 49408}, GgmlType::F16);
    t.add(prefix + "text_model.embeddings.position_embedding.weight", {d, 77}, GgmlType::F32);
    for (int i = 0; i < 12; ++i) {
        const auto p = fmt::format("{}text_model.encoder.layers.{}.", prefix, i);
        for (const char* proj : {"q_proj", "k_proj", "v_proj", "out_proj"})
            t.linear(p + "self_attn." + proj, d, d);
        t.norm(p + "layer_norm1", d);
        t.norm(p + "layer_norm2", d);
        t.linear(p + "mlp.fc1", d, ff);
        t.linear(p + "mlp.fc2", ff, d);
    }
    t.norm(prefix + "text_model.final_layer_norm", d);
}

// auto_encoder_kl.hpp: AutoencoderKL (ch 128, multipliers 1 2 4 4, 2 resnet blocks per level down and 3 up,
// one attention block in the middle, 1x1-conv attention); z = 4 with quant convs (SD1/SDXL), 16 without
// (Flux's ae), or 32 with quant convs (Flux.2's). sd-server loads the encoder too.
void autoencoder_kl(Tensors& t, const std::string& prefix, std::uint64_t z, bool quant_conv) {
    constexpr std::uint64_t ch = 128;
    constexpr std::uint64_t mult[] = {1, 2, 4, 4};
    const auto resnet = [&](const std::string& p, std::uint64_t in, std::uint64_t out) {
        t.norm(p + ".norm1", in);
        t.conv(p + ".conv1", in, out, 3);
        t.norm(p + ".norm2", out);
        t.conv(p + ".conv2", out, out, 3);
        if (in != out) t.conv(p + ".nin_shortcut", in, out, 1);
    };
    const auto middle = [&](const std::string& p, std::uint64_t c) {
        resnet(p + ".mid.block_1", c, c);
        t.norm(p + ".mid.attn_1.norm", c);
        for (const char* x : {"q", "k", "v", "proj_out"}) t.conv(p + ".mid.attn_1." + x, c, c, 1);
        resnet(p + ".mid.block_2", c, c);
    };
    const auto enc = prefix + "encoder", dec = prefix + "decoder";
    t.conv(enc + ".conv_in", 3, ch, 3);
    std::uint64_t in = ch;
    for (int i = 0; i < 4; ++i) {
        for (int j = 0; j < 2; ++j) {
            resnet(fmt::format("{}.down.{}.block.{}", enc, i, j), in, ch * mult[i]);
            in = ch * mult[i];
        }
        if (i != 3) t.conv(fmt::format("{}.down.{}.downsample.conv", enc, i), in, in, 3);
    }
    middle(enc, in);
    t.norm(enc + ".norm_out", in);
    t.conv(enc + ".conv_out", in, 2 * z, 3);
    if (quant_conv) {
        t.conv(prefix + "quant_conv", 2 * z, 2 * z, 1);
        t.conv(prefix + "post_quant_conv", z, z, 1);
    }
    in = ch * mult[3];
    t.conv(dec + ".conv_in", z, in, 3);
    middle(dec, in);
    for (int i = 3; i >= 0; --i) {
        for (int j = 0; j < 3; ++j) {
            resnet(fmt::format("{}.up.{}.block.{}", dec, i, j), in, ch * mult[i]);
            in = ch * mult[i];
        }
        if (i != 0) t.conv(fmt::format("{}.up.{}.upsample.conv", dec, i), in, in, 3);
    }
    t.norm(dec + ".norm_out", in);
    t.conv(dec + ".conv_out", in, 3, 3);
}

// unet.hpp: SD1.x's UNet, fixed in sd.cpp: 320 channels × (1 2 4 4), 2 res blocks per level, attention at
// the first three levels (8 heads, context 768, 1x1-conv projections), time embedding 1280.
void sd1_unet(Tensors& t, const std::string& p) {
    constexpr std::uint64_t mc = 320, temb = 1280, context = 768;
    constexpr std::uint64_t mult[] = {1, 2, 4, 4};
    const auto res = [&](const std::string& n, std::uint64_t in, std::uint64_t out) {
        t.norm(n + ".in_layers.0", in);
        t.conv(n + ".in_layers.2", in, out, 3);
        t.linear(n + ".emb_layers.1", temb, out);
        t.norm(n + ".out_layers.0", out);
        t.conv(n + ".out_layers.3", out, out, 3);
        if (in != out) t.conv(n + ".skip_connection", in, out, 1);
    };
    const auto attention = [&](const std::string& n, std::uint64_t c) {
        t.norm(n + ".norm", c);
        t.conv(n + ".proj_in", c, c, 1);
        const auto b = n + ".transformer_blocks.0.";
        for (const char* a : {"attn1", "attn2"}) {
            const std::uint64_t kv = std::string(a) == "attn1" ? c : context;
            t.linear(b + a + ".to_q", c, c, false);
            t.linear(b + a + ".to_k", kv, c, false);
            t.linear(b + a + ".to_v", kv, c, false);
            t.linear(b + a + ".to_out.0", c, c);
        }
        t.linear(b + "ff.net.0.proj", c, 8 * c);  // GEGLU: 2 × 4c
        t.linear(b + "ff.net.2", 4 * c, c);
        for (const char* nn : {"norm1", "norm2", "norm3"}) t.norm(b + nn, c);
        t.conv(n + ".proj_out", c, c, 1);
    };
    t.linear(p + "time_embed.0", mc, temb);
    t.linear(p + "time_embed.2", temb, temb);
    t.conv(p + "input_blocks.0.0", 4, mc, 3);
    std::vector<std::uint64_t> skips = {mc};
    std::uint64_t ch = mc;
    int idx = 1;
    for (int i = 0; i < 4; ++i) {
        for (int j = 0; j < 2; ++j, ++idx) {
            res(fmt::format("{}input_blocks.{}.0", p, idx), ch, mult[i] * mc);
            ch = mult[i] * mc;
            if (i < 3) attention(fmt::format("{}input_blocks.{}.1", p, idx), ch);
            skips.push_back(ch);
        }
        if (i < 3) {
            t.conv(fmt::format("{}input_blocks.{}.0.op", p, idx++), ch, ch, 3);
            skips.push_back(ch);
        }
    }
    res(p + "middle_block.0", ch, ch);
    attention(p + "middle_block.1", ch);
    res(p + "middle_block.2", ch, ch);
    idx = 0;
    for (int i = 3; i >= 0; --i)
        for (int j = 0; j < 3; ++j, ++idx) {
            const std::uint64_t skip = skips.back();
            skips.pop_back();
            res(fmt::format("{}output_blocks.{}.0", p, idx), ch + skip, mult[i] * mc);
            ch = mult[i] * mc;
            int up = 1;
            if (i < 3) attention(fmt::format("{}output_blocks.{}.{}", p, idx, up++), ch);
            if (i > 0 && j == 2) t.conv(fmt::format("{}output_blocks.{}.{}.conv", p, idx, up), ch, ch, 3);
        }
    t.norm(p + "out.0", ch);
    t.conv(p + "out.2", ch, 4, 3);
}

// tae.hpp: the tiny autoencoder (64 channels, 3 blocks per stage); z = 4 (TAESD, SD1/SDXL) or 16 (TAEF1,
// Flux). sd-server loads the encoder too (img2img). The decoder's indices skip the parameterless ReLU /
// Upsample entries, as the PyTorch Sequential does.
void tae(Tensors& t, std::uint64_t z) {
    constexpr std::uint64_t c = 64;
    const auto block_of = [&](const char* part, int i) {
        for (const char* conv : {"conv.0", "conv.2", "conv.4"})
            t.conv(fmt::format("{}.layers.{}.{}", part, i, conv), c, c, 3);
    };
    t.conv("encoder.layers.0", 3, c, 3);
    block_of("encoder", 1);
    int e = 2;
    for (int stage = 0; stage < 3; ++stage) {
        t.conv(fmt::format("encoder.layers.{}", e++), c, c, 3, false);
        for (int b = 0; b < 3; ++b) block_of("encoder", e++);
    }
    t.conv(fmt::format("encoder.layers.{}", e), c, z, 3);
    const auto block = [&](int i) { block_of("decoder", i); };
    t.conv("decoder.layers.0", z, c, 3);
    int i = 2;
    for (int stage = 0; stage < 3; ++stage) {
        for (int b = 0; b < 3; ++b) block(i++);
        ++i;  // Upsample
        t.conv(fmt::format("decoder.layers.{}", i++), c, c, 3, false);
    }
    block(i++);
    t.conv(fmt::format("decoder.layers.{}", i), c, 3, 3);
}

}  // namespace

const std::vector<DiffusionPreset>& diffusion_presets() {
    static const std::vector<DiffusionPreset> presets = {
        {"flux-tiny", "Flux.1-dev layout, 1+1 blocks, width 256 (2 heads): loads and draws on a CPU",
         DiffusionPart::flux, FluxShape{}},
        {"flux-min",
         "Flux.1-dev layout, 1 double block and no single one, width 128 (1 head): the cheapest Flux step "
         "(a large image's decoder checked on a software driver)",
         DiffusionPart::flux, FluxShape{1, 0, 128, 4096, true}},
        {"flux1-1block", "Flux.1-dev layout at its real width 3072 (24 heads), 1+1 blocks",
         DiffusionPart::flux, FluxShape{1, 1, 3072, 4096, true}},
        {"flux1-dev", "Flux.1-dev at its real size: 19 double + 38 single blocks, width 3072 (12 B params)",
         DiffusionPart::flux, FluxShape{19, 38, 3072, 4096, true}},
        {"flux2-tiny",
         "Flux.2-dev layout, 1 double + 48 single blocks, width 256, for tiny-mistral-te: draws on a CPU",
         DiffusionPart::flux2, FluxShape{1, 48, 256, 768, true}},
        {"flux2-dev",
         "Flux.2-dev at its real size: 8 double + 48 single blocks, width 6144, Mistral Small 3.2's 3 × 5120 "
         "context (32 B params)",
         DiffusionPart::flux2, FluxShape{8, 48, 6144, 15360, true}},
        {"flux2-vae",
         "Flux.2's AutoencoderKL (32 latent channels, quant convs), the full decoder",
         DiffusionPart::flux2_vae,
         {}},
        {"clip-l",
         "CLIP ViT-L/14 text encoder (Flux's and SD1's), as sd.cpp fixes it",
         DiffusionPart::clip_l,
         {}},
        {"taef1", "TAEF1: the tiny decoder for Flux latents (16 channels)", DiffusionPart::taef1, {}},
        {"taesd", "TAESD: the tiny decoder for SD1/SDXL latents (4 channels)", DiffusionPart::taesd, {}},
        {"flux-vae",
         "Flux's AutoencoderKL (ae: 16 latent channels), the full decoder",
         DiffusionPart::flux_vae,
         {}},
        {"sd1.5",
         "Stable Diffusion 1.5 as one checkpoint: UNet + CLIP-L + VAE (1.07 B params), as sd.cpp detects it",
         DiffusionPart::sd1,
         {}},
    };
    return presets;
}

const DiffusionPreset* find_diffusion_preset(std::string_view name) {
    for (const auto& p : diffusion_presets())
        if (p.name == name) return &p;
    return nullptr;
}

gguf::Model build_diffusion(const DiffusionPreset& p, GgmlType weight_type) {
    Tensors t(weight_type);
    switch (p.part) {
        case DiffusionPart::flux:
            flux(t, p.flux);
            break;
        case DiffusionPart::flux2:
            flux2(t, p.flux);
            break;
        case DiffusionPart::clip_l:
            clip_l(t);
            break;
        case DiffusionPart::taef1:
            tae(t, 16);
            break;
        case DiffusionPart::taesd:
            tae(t, 4);
            break;
        case DiffusionPart::flux_vae:
            autoencoder_kl(t, "", 16, false);
            break;
        case DiffusionPart::flux2_vae:
            autoencoder_kl(t, "", 32, true);
            break;
        case DiffusionPart::sd1:
            sd1_unet(t, "model.diffusion_model.");
            clip_l(t, "cond_stage_model.transformer.");
            autoencoder_kl(t, "first_stage_model.", 4, true);
            break;
    }
    gguf::Model model;
    model.metadata.set("general.name", gguf::Value::str(p.name));
    model.metadata.set("general.description", gguf::Value::str("loch-synth " + p.name + ": zero weights"));
    model.tensors = std::move(t.list());
    lay_out(model);
    return model;
}

}  // namespace loch::synth
