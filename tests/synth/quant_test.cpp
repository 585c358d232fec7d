// Tensor type mixes follow llama-quant.cpp, so synthetic files weigh what real ones weigh per tensor.
#include <gtest/gtest.h>

#include "synth/synth.hpp"

namespace loch::synth {
namespace {

using gguf::GgmlType;

GgmlType type_of(const gguf::Model& m, const std::string& name) {
    const auto* t = m.find_tensor(name);
    if (!t) throw std::runtime_error("no tensor " + name);
    return t->type;
}

TEST(Quant, Q4KMFollowsLlamaCppMix) {
    const auto m = build_model(find_preset("llama-3.1-8b")->shape, "q4_k_m");
    EXPECT_EQ(m.metadata.get_uint("general.file_type"), 15u);  // LLAMA_FTYPE_MOSTLY_Q4_K_M
    EXPECT_EQ(type_of(m, "token_embd.weight"), GgmlType::Q4_K);
    EXPECT_EQ(type_of(m, "output.weight"), GgmlType::Q6_K);
    EXPECT_EQ(type_of(m, "output_norm.weight"), GgmlType::F32);
    EXPECT_EQ(type_of(m, "blk.0.attn_norm.weight"), GgmlType::F32);
    EXPECT_EQ(type_of(m, "blk.0.attn_q.weight"), GgmlType::Q4_K);
    // use_more_bits(i, 32): layers 0-3, 28-31 and every third in between get Q6_K for attn_v/ffn_down.
    EXPECT_EQ(type_of(m, "blk.0.attn_v.weight"), GgmlType::Q6_K);
    EXPECT_EQ(type_of(m, "blk.4.attn_v.weight"), GgmlType::Q4_K);
    EXPECT_EQ(type_of(m, "blk.6.attn_v.weight"), GgmlType::Q6_K);
    EXPECT_EQ(type_of(m, "blk.31.ffn_down.weight"), GgmlType::Q6_K);
    EXPECT_EQ(type_of(m, "blk.5.ffn_down.weight"), GgmlType::Q4_K);
    EXPECT_EQ(type_of(m, "blk.5.ffn_up.weight"), GgmlType::Q4_K);
}

TEST(Quant, EightExpertModelsKeepAttentionKVAtQ8) {
    const auto m = build_model(find_preset("mixtral-8x7b")->shape, "q4_k_m");
    EXPECT_EQ(type_of(m, "blk.3.attn_v.weight"), GgmlType::Q8_0);
    EXPECT_EQ(type_of(m, "blk.3.attn_k.weight"), GgmlType::Q8_0);
    EXPECT_EQ(type_of(m, "blk.3.attn_output.weight"), GgmlType::Q5_K);
    EXPECT_EQ(type_of(m, "blk.3.ffn_gate_inp.weight"), GgmlType::F32);
    EXPECT_EQ(type_of(m, "blk.3.ffn_up_exps.weight"), GgmlType::Q4_K);
}

TEST(Quant, TiedEmbeddingIsQuantizedLikeTheOutput) {
    const auto m = build_model(find_preset("gemma-3-12b")->shape, "q4_k_m");
    EXPECT_EQ(type_of(m, "token_embd.weight"), GgmlType::Q6_K);
}

TEST(Quant, RowsThatAreNotWholeBlocksFallBackLikeLlamaCpp) {
    Shape s = find_preset("tiny-llama")->shape;
    s.n_embd = 96;  // not a multiple of 256: Q4_K → Q5_0 (block 32)
    s.n_head = 3;
    s.n_head_kv = {1};
    const auto m = build_model(s, "q4_k");
    EXPECT_EQ(type_of(m, "blk.0.attn_q.weight"), GgmlType::Q5_0);
    EXPECT_EQ(type_of(m, "blk.0.ffn_up.weight"), GgmlType::Q5_0);
    // ffn_down rows are n_ff = 512 wide: Q4_K fits.
    EXPECT_EQ(type_of(m, "blk.0.ffn_down.weight"), GgmlType::Q4_K);

    s.n_embd = 72;  // not even a multiple of 32: F16
    s.n_head = 3;
    const auto m2 = build_model(s, "q4_k");
    EXPECT_EQ(type_of(m2, "blk.0.attn_q.weight"), GgmlType::F16);
}

TEST(Quant, PureTensorTypeAndFloatTypes) {
    const auto* p = find_preset("tiny-qwen3");
    const auto pure = build_model(p->shape, "Q4_K");
    for (const auto& t : pure.tensors) {
        EXPECT_EQ(t.type, t.dims.size() == 1 ? GgmlType::F32 : GgmlType::Q4_K) << t.name;
    }
    for (auto [name, type] : {std::pair{"f32", GgmlType::F32},
                              {"f16", GgmlType::F16},
                              {"bf16", GgmlType::BF16},
                              {"q8_0", GgmlType::Q8_0}}) {
        const auto m = build_model(p->shape, name);
        EXPECT_EQ(type_of(m, "blk.1.ffn_up.weight"), type) << name;
        EXPECT_EQ(type_of(m, "blk.1.attn_q_norm.weight"), GgmlType::F32) << name;
    }
    EXPECT_EQ(type_of(build_model(p->shape, "q4_0"), "output.weight"), GgmlType::Q6_K);
    EXPECT_EQ(type_of(build_model(p->shape, "q8_0"), "output.weight"), GgmlType::Q8_0);
}

TEST(Quant, UnknownQuantizationIsRejectedWithTheKnownList) {
    try {
        build_model(find_preset("tiny-llama")->shape, "q9_z");
        FAIL() << "expected SynthError";
    } catch (const SynthError& e) {
        EXPECT_NE(std::string(e.what()).find("q9_z"), std::string::npos);
        EXPECT_NE(std::string(e.what()).find("q4_k_m"), std::string::npos);
    }
}

}  // namespace
}  // namespace loch::synth
