// The diffusion presets against the real models' own numbers: sd.cpp's docs list flux1-dev q8_0 at
// 12068.09 MB (MiB) and sd-server loads CLIP-L as 196 tensors; the names are what sd.cpp's loader looks for.
#include <gtest/gtest.h>

#include "synth/diffusion.hpp"
#include "synth/synth.hpp"

using namespace loch::synth;

namespace {
std::uint64_t tensor_bytes(const loch::gguf::Model& m) {
    std::uint64_t n = 0;
    for (const auto& t : m.tensors) n += t.n_bytes();
    return n;
}
bool has(const loch::gguf::Model& m, const std::string& name) {
    for (const auto& t : m.tensors)
        if (t.name == name) return true;
    return false;
}
}  // namespace

TEST(Diffusion, Flux1DevHasTheRealTensorCountParametersAndQ8Size) {
    const auto m = build_diffusion(*find_diffusion_preset("flux1-dev"), loch::gguf::GgmlType::Q8_0);
    EXPECT_EQ(m.tensors.size(), 780u);
    EXPECT_NEAR(double(m.parameter_count()) / 1e9, 11.90, 0.01);
    EXPECT_NEAR(double(tensor_bytes(m)) / (1024.0 * 1024.0), 12068.09, 0.5);
    EXPECT_TRUE(has(m, "double_blocks.18.img_attn.norm.key_norm.scale"));
    EXPECT_TRUE(has(m, "single_blocks.37.linear2.weight"));
    EXPECT_TRUE(has(m, "guidance_in.out_layer.weight"));
}

TEST(Diffusion, TheTextEncoderAndTinyDecodersHaveSdCppsTensorCounts) {
    EXPECT_EQ(build_diffusion(*find_diffusion_preset("clip-l")).tensors.size(), 196u);
    const auto taef1 = build_diffusion(*find_diffusion_preset("taef1"));
    EXPECT_EQ(taef1.tensors.size(), 134u);  // encoder and decoder: sd-server loads both
    EXPECT_TRUE(has(taef1, "decoder.layers.18.weight"));
    EXPECT_TRUE(has(taef1, "encoder.layers.14.weight"));
}

// flux-min (the lavapipe check's diffusion model): one double block, no single one, one head — what sd.cpp
// reads as depth 1, depth_single_blocks 0, hidden 128.
TEST(Diffusion, FluxMinHasOneDoubleBlockNoSingleOneAndOneHead) {
    const auto m = build_diffusion(*find_diffusion_preset("flux-min"));
    EXPECT_TRUE(has(m, "double_blocks.0.img_attn.qkv.weight"));
    EXPECT_FALSE(has(m, "double_blocks.1.img_attn.qkv.weight"));
    EXPECT_FALSE(has(m, "single_blocks.0.linear1.weight"));
    for (const auto& t : m.tensors)
        if (t.name == "img_in.weight") EXPECT_EQ(t.dims[1], 128u);
}

TEST(Diffusion, AFluxWidthThatIsNotAMultipleOf128IsRefused) {
    DiffusionPreset p = *find_diffusion_preset("flux-tiny");
    p.flux.hidden = 200;
    EXPECT_THROW(build_diffusion(p), SynthError);
}

TEST(Diffusion, Sd15IsOneCheckpointWithTheRealParameterCountsUnderTheLdmPrefixes) {
    const auto m = build_diffusion(*find_diffusion_preset("sd1.5"));
    std::uint64_t unet = 0, clip = 0, vae = 0;
    for (const auto& t : m.tensors) {
        std::uint64_t n = 1;
        for (auto d : t.dims) n *= d;
        (t.name.rfind("model.diffusion_model.", 0) == 0          ? unet
         : t.name.rfind("cond_stage_model.transformer.", 0) == 0 ? clip
         : t.name.rfind("first_stage_model.", 0) == 0            ? vae
                                                                 : (ADD_FAILURE() << t.name, unet)) += n;
    }
    // runwayml/stable-diffusion-v1-5: UNet 859.52 M, CLIP ViT-L/14 text 123.06 M, AutoencoderKL 83.65 M.
    EXPECT_NEAR(double(unet) / 1e6, 859.52, 0.1);
    EXPECT_NEAR(double(clip) / 1e6, 123.06, 0.1);
    EXPECT_NEAR(double(vae) / 1e6, 83.65, 0.1);
    // What sd.cpp's version detection reads: a UNet with a middle attention block and output_blocks.7.1.
    EXPECT_TRUE(has(m, "model.diffusion_model.middle_block.1.proj_in.weight"));
    EXPECT_TRUE(has(m, "model.diffusion_model.output_blocks.7.1.transformer_blocks.0.attn1.to_k.weight"));
    EXPECT_TRUE(has(m, "model.diffusion_model.output_blocks.8.2.conv.weight"));
    EXPECT_TRUE(has(m, "cond_stage_model.transformer.text_model.embeddings.token_embedding.weight"));
    EXPECT_TRUE(has(m, "first_stage_model.post_quant_conv.weight"));
    EXPECT_TRUE(has(m, "first_stage_model.decoder.up.3.upsample.conv.weight"));
}

TEST(Diffusion, FluxsAutoencoderHas16LatentChannelsAndNoQuantConvs) {
    const auto m = build_diffusion(*find_diffusion_preset("flux-vae"));
    EXPECT_TRUE(has(m, "decoder.conv_in.weight"));
    EXPECT_FALSE(has(m, "quant_conv.weight"));
    for (const auto& t : m.tensors)
        if (t.name == "decoder.conv_in.weight") EXPECT_EQ(t.dims[2], 16u);
    EXPECT_NEAR(double(m.parameter_count()) / 1e6, 83.8, 0.5);
}
