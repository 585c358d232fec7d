// Bad shapes are rejected before anything is written, with the offending numbers in the message.
#include <gtest/gtest.h>

#include "synth/synth.hpp"

namespace loch::synth {
namespace {

Shape tiny() {
    return find_preset("tiny-llama")->shape;
}

std::string error_of(const Shape& s) {
    try {
        validate(s);
    } catch (const SynthError& e) {
        return e.what();
    }
    return "";
}

TEST(Shape, TinyPresetIsValid) {
    EXPECT_EQ(error_of(tiny()), "");
}

TEST(Shape, EmbeddingNotDivisibleByHeads) {
    Shape s = tiny();
    s.n_embd = 1000;
    s.n_head = 3;
    s.n_head_kv = {1};
    const auto msg = error_of(s);
    EXPECT_NE(msg.find("n_embd 1000 is not divisible by n_head 3"), std::string::npos) << msg;
}

TEST(Shape, KvHeadsMustDivideHeads) {
    Shape s = tiny();
    s.n_head_kv = {3};
    EXPECT_NE(error_of(s).find("n_head_kv 3"), std::string::npos) << error_of(s);
    s.n_head_kv = {1, 2, 4};  // 3 values for 2 layers
    EXPECT_NE(error_of(s).find("3 values"), std::string::npos) << error_of(s);
    s.n_head_kv = {1, 2};  // llama.cpp sizes every layer from layer 0 for these architectures
    EXPECT_NE(error_of(s).find("layer 0: 1, layer 1: 2"), std::string::npos) << error_of(s);
    s.n_head_kv = {2, 2};  // the per-layer form itself is fine
    EXPECT_EQ(error_of(s), "");
}

TEST(Shape, RangesAndArchitectures) {
    Shape s = tiny();
    s.n_vocab = 100;
    EXPECT_NE(error_of(s).find("n_vocab 100"), std::string::npos) << error_of(s);
    s = tiny();
    s.n_layer = 0;
    EXPECT_NE(error_of(s).find("n_layer 0"), std::string::npos);
    s = tiny();
    s.n_layer = 600;
    EXPECT_NE(error_of(s).find("n_layer 600"), std::string::npos);
    s = tiny();
    s.arch = "gpt5";
    EXPECT_NE(error_of(s).find("unknown architecture 'gpt5'"), std::string::npos);
    s = tiny();
    s.head_dim = 33;
    EXPECT_NE(error_of(s).find("head_dim 33"), std::string::npos);
    s = tiny();
    s.norm_eps = 0.0f;
    EXPECT_NE(error_of(s).find("norm_eps"), std::string::npos);
}

TEST(Shape, ExpertCombinations) {
    Shape s = find_preset("tiny-qwen3moe")->shape;
    s.n_expert_used = s.n_expert + 1;
    EXPECT_NE(error_of(s).find("n_expert_used 9"), std::string::npos) << error_of(s);
    s.n_expert = 0;
    s.n_expert_used = 0;
    EXPECT_NE(error_of(s).find("mixture-of-experts"), std::string::npos) << error_of(s);

    Shape q = find_preset("tiny-qwen3")->shape;
    q.n_expert = 4;
    q.n_expert_used = 2;
    EXPECT_NE(error_of(q).find("has no experts"), std::string::npos) << error_of(q);
}

TEST(Shape, ArchitectureSpecificRules) {
    Shape q = find_preset("tiny-qwen2")->shape;
    q.head_dim = 128;  // 4 x 128 != 256
    EXPECT_NE(error_of(q).find("qwen2 needs head_dim * n_head == n_embd"), std::string::npos) << error_of(q);

    Shape d = find_preset("tiny-deepseek2")->shape;
    d.rope_dim = d.head_dim;
    EXPECT_NE(error_of(d).find("must exceed rope_dim"), std::string::npos) << error_of(d);
    d = find_preset("tiny-deepseek2")->shape;
    d.kv_lora_rank = 0;
    EXPECT_NE(error_of(d).find("kv_lora_rank 0"), std::string::npos) << error_of(d);

    Shape l = tiny();
    l.sliding_window = 128;
    EXPECT_NE(error_of(l).find("sliding-window"), std::string::npos) << error_of(l);
}

TEST(Shape, BuildModelValidatesToo) {
    Shape s = tiny();
    s.n_head = 0;
    EXPECT_THROW(build_model(s, "f16"), SynthError);
}

TEST(Shape, KvHeadsForms) {
    Shape s = tiny();
    s.n_head_kv.clear();
    EXPECT_EQ(s.kv_heads(0), s.n_head);
    s.n_head_kv = {2};
    EXPECT_EQ(s.kv_heads(1), 2u);
    s.n_head_kv = {1, 4};
    EXPECT_EQ(s.kv_heads(1), 4u);
    s.n_head_kv = {4, 4};
    const auto m = build_model(s, "f16");
    const auto* kv = m.arch_value("attention.head_count_kv");
    ASSERT_NE(kv, nullptr);
    ASSERT_NE(kv->as_array(), nullptr) << "per-layer KV heads are written as an array";
    EXPECT_EQ(kv->as_array()->items.size(), 2u);
    EXPECT_EQ(m.find_tensor("blk.1.attn_k.weight")->dims[1], 4u * 64u);
}

}  // namespace
}  // namespace loch::synth
