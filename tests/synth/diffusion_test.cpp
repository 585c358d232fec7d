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

TEST(Diffusion, AFluxWidthThatIsNotAMultipleOf128IsRefused) {
    DiffusionPreset p = *find_diffusion_preset("flux-tiny");
    p.flux.hidden = 200;
    EXPECT_THROW(build_diffusion(p), SynthError);
}
