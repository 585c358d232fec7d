// Presets must have the real models' shapes: the parameter count is the quickest proof (±0.5% of the
// published count), and every preset must build for every offered quantization.
#include <gtest/gtest.h>

#include <cmath>
#include <set>

#include "gguf/writer.hpp"
#include "synth/synth.hpp"

namespace loch::synth {
namespace {

TEST(Presets, RealModelsMatchPublishedParameterCounts) {
    int real = 0;
    for (const auto& p : list_presets()) {
        if (p.published_params == 0) continue;
        ++real;
        const auto model = build_model(p.shape, p.default_quant);
        const double got = static_cast<double>(model.parameter_count());
        const double want = static_cast<double>(p.published_params);
        EXPECT_LT(std::abs(got - want) / want, 0.005)
            << p.name << ": " << got << " params, published " << want;
    }
    EXPECT_GE(real, 12);
}

TEST(Presets, Llama31_8B_AtQ4K_Has8_03BillionParameters) {
    const auto* p = find_preset("llama-3.1-8b");
    ASSERT_NE(p, nullptr);
    const auto model = build_model(p->shape, "q4_k");
    EXPECT_NEAR(static_cast<double>(model.parameter_count()) / 1e9, 8.03, 8.03 * 0.005);
    EXPECT_EQ(model.architecture(), "llama");
    EXPECT_EQ(model.arch_uint("block_count"), 32u);
    EXPECT_EQ(model.arch_uint("attention.head_count_kv"), 8u);
    EXPECT_EQ(model.arch_uint("context_length"), 131072u);
}

TEST(Presets, Llama31_8B_Q4KM_FileSizeIsThatOfTheRealFile) {
    // bartowski/Meta-Llama-3.1-8B-Instruct-GGUF Q4_K_M: 4.92 GB. Only the tokenizer metadata differs.
    const auto model = build_model(find_preset("llama-3.1-8b")->shape, "q4_k_m");
    EXPECT_NEAR(static_cast<double>(model.file_size), 4.92e9, 4.92e9 * 0.01);
}

TEST(Presets, NamesAreUniqueAndFindable) {
    std::set<std::string> names;
    for (const auto& p : list_presets()) {
        EXPECT_TRUE(names.insert(p.name).second) << "duplicate preset " << p.name;
        EXPECT_EQ(find_preset(p.name), &p);
        EXPECT_NO_THROW(validate(p.shape)) << p.name;
        EXPECT_TRUE(is_known_quant(p.default_quant)) << p.name;
    }
    EXPECT_EQ(find_preset("no-such-model"), nullptr);
    for (const char* required : {"llama-3.1-8b", "llama-3.1-70b", "llama-2-13b", "qwen2.5-7b", "qwen2.5-14b",
                                 "qwen2.5-32b", "qwen3-8b", "qwen3-30b-a3b", "gemma-3-12b",
                                 "mistral-small-24b", "deepseek-v2-lite", "mixtral-8x7b", "demo"}) {
        EXPECT_NE(find_preset(required), nullptr) << required;
    }
}

TEST(Presets, EveryArchitectureHasATinyPreset) {
    for (const auto& arch : architectures()) {
        const auto* p = find_preset("tiny-" + arch);
        ASSERT_NE(p, nullptr) << "tiny-" << arch;
        EXPECT_EQ(p->shape.arch, arch);
        const auto model = build_model(p->shape, p->default_quant);
        EXPECT_LT(model.file_size, 16u << 20) << p->name << " is not CI-sized";
    }
}

TEST(Presets, DemoIsSmallButReal) {
    const auto* p = find_preset("demo");
    ASSERT_NE(p, nullptr);
    const auto model = build_model(p->shape, p->default_quant);
    EXPECT_GT(model.file_size, 2u << 20);
    EXPECT_LT(model.file_size, 32u << 20);
    EXPECT_EQ(default_weights(model), Weights::small);  // as a shape, nothing says it is the demo
    EXPECT_EQ(default_weights(model, "demo"), Weights::brief);
    // Reshaped past what brief needs (no "▁hi" in 300 tokens): small values.
    auto shape = p->shape;
    shape.n_vocab = 300;
    EXPECT_EQ(default_weights(build_model(shape, p->default_quant), "demo"), Weights::small);
}

TEST(Presets, LargePresetsDefaultToSparseZeros) {
    const auto model = build_model(find_preset("llama-3.1-70b")->shape, "q4_k_m");
    EXPECT_EQ(default_weights(model), Weights::zeros);
}

TEST(Presets, EveryPresetBuildsForItsQuantizationsMixes) {
    // Tiny presets with every quantization; real shapes with the mixes whose rules depend on shapes.
    for (const auto& p : list_presets()) {
        const bool tiny = p.published_params == 0;
        const std::vector<std::string> quants =
            tiny ? quant_names() : std::vector<std::string>{"q8_0", "q4_k_s", "q3_k_m", "q2_k"};
        for (const auto& q : quants) {
            EXPECT_NO_THROW(build_model(p.shape, q)) << p.name << " " << q;
        }
    }
}

TEST(Presets, ArchitectureSpecificShapes) {
    const auto gemma = build_model(find_preset("gemma-3-12b")->shape, "q4_k_m");
    EXPECT_EQ(gemma.arch_uint("attention.sliding_window"), 1024u);
    EXPECT_EQ(gemma.arch_uint("attention.sliding_window_pattern"), 6u);
    EXPECT_EQ(gemma.find_tensor("output.weight"), nullptr) << "gemma3 ties the output to the embedding";
    EXPECT_EQ(gemma.arch_uint("attention.key_length"), 256u);

    const auto ds = build_model(find_preset("deepseek-v2-lite")->shape, "q4_k_m");
    EXPECT_EQ(ds.arch_uint("attention.kv_lora_rank"), 512u);
    EXPECT_EQ(ds.arch_uint("attention.key_length"), 576u) << "MLA caches kv_lora_rank + rope dims";
    EXPECT_EQ(ds.arch_uint("attention.value_length"), 512u);
    EXPECT_EQ(ds.arch_uint("attention.head_count_kv"), 1u);
    ASSERT_NE(ds.find_tensor("blk.0.ffn_gate.weight"), nullptr) << "first layer is dense";
    ASSERT_NE(ds.find_tensor("blk.1.ffn_gate_exps.weight"), nullptr);
    EXPECT_EQ(ds.find_tensor("blk.1.ffn_gate_exps.weight")->dims,
              (std::vector<std::uint64_t>{2048, 1408, 64}));
    EXPECT_EQ(ds.find_tensor("blk.1.attn_k_b.weight")->dims, (std::vector<std::uint64_t>{128, 512, 16}));

    const auto moe = build_model(find_preset("qwen3-30b-a3b")->shape, "q4_k_m");
    EXPECT_EQ(moe.arch_uint("expert_count"), 128u);
    EXPECT_EQ(moe.arch_uint("expert_used_count"), 8u);
    EXPECT_EQ(moe.find_tensor("blk.0.ffn_down_exps.weight")->dims,
              (std::vector<std::uint64_t>{768, 2048, 128}));

    const auto qwen2 = build_model(find_preset("qwen2.5-7b")->shape, "f16");
    ASSERT_NE(qwen2.find_tensor("blk.0.attn_q.bias"), nullptr);
    EXPECT_EQ(qwen2.find_tensor("blk.0.attn_k.weight")->dims, (std::vector<std::uint64_t>{3584, 512}));
}

}  // namespace
}  // namespace loch::synth
