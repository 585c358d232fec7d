// The vision projector's plan from its GGUF (plan/projector.hpp), on loch-synth's projectors.
#include <gtest/gtest.h>

#include "core/memory.hpp"
#include "plan/projector.hpp"
#include "synth/projector.hpp"

namespace loch::plan {
namespace {

TEST(Projector, Llava15IsItsWeightsAndAFixedBufferOf576TokensPerImage) {
    const auto m = synth::build_projector(synth::find_projector_preset("llava-1.5")->shape);
    const auto p = plan_projector(m);
    EXPECT_EQ(p.type, "mlp");
    EXPECT_EQ(p.image_tokens, 576u);
    EXPECT_EQ(p.text_embd, 4096u);
    EXPECT_EQ(p.weights, m.tensor_bytes());
    // The pinned engine's log for this file on the CPU (see the header): the bound is never under it.
    EXPECT_GE(p.compute_no_flash, static_cast<std::uint64_t>(32.88 * kMiB));
    EXPECT_GE(p.compute_flash, static_cast<std::uint64_t>(21.55 * kMiB));
    EXPECT_LT(p.compute_no_flash, 2 * static_cast<std::uint64_t>(32.88 * kMiB));
    // Unknown flash attention (auto) plans without it; a GPU adds the projector's own CUDA backend: on the
    // H200 the process grew by 724 MiB for this projector after its first image, with flash attention.
    EXPECT_GE(p.bytes(true, true), static_cast<std::uint64_t>(724 * kMiB));
    EXPECT_GE(p.bytes(true, false), static_cast<std::uint64_t>(740 * kMiB));
    EXPECT_EQ(p.bytes(false, std::nullopt), p.weights + p.compute_no_flash);
    EXPECT_EQ(p.bytes(true, true), p.weights + p.compute_flash + p.gpu_extra);
}

TEST(Projector, ProjectorsThatResizeByImageOrTileAreRefusedWithTheReason) {
    auto m = synth::build_projector(synth::find_projector_preset("llava-tiny")->shape);
    m.metadata.set("clip.projector_type", gguf::Value::str("qwen2vl_merger"));
    try {
        plan_projector(m);
        ADD_FAILURE() << "a dynamic-resolution projector was planned";
    } catch (const std::invalid_argument& e) {
        EXPECT_NE(std::string(e.what()).find("qwen2vl_merger"), std::string::npos) << e.what();
    }
    m.metadata.set("clip.projector_type", gguf::Value::str("mlp"));
    m.metadata.set(
        "clip.vision.image_grid_pinpoints",
        gguf::Value::array(gguf::ValueType::INT32, {gguf::Value::i32(336), gguf::Value::i32(672)}));
    EXPECT_THROW(plan_projector(m), std::invalid_argument);
    auto text = synth::build_projector(synth::find_projector_preset("llava-tiny")->shape);
    text.metadata.set("general.architecture", gguf::Value::str("llama"));
    EXPECT_THROW(plan_projector(text), std::invalid_argument);
}

}  // namespace
}  // namespace loch::plan
