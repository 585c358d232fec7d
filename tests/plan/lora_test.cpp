// LoRA adapters in the plan (plan/lora.hpp): what llama.cpp's loader refuses is refused with its reason, and
// each pair is planned beside the weight it adapts, with its products' activations where layers run.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "core/memory.hpp"
#include "plan/dry_run.hpp"
#include "plan/lora.hpp"
#include "plan/plan.hpp"
#include "plan/reservation.hpp"
#include "synth/lora.hpp"
#include "synth/synth.hpp"

namespace loch::plan {
namespace {

using ::testing::HasSubstr;

gguf::Model demo(std::uint32_t embd = 0) {
    auto shape = synth::find_preset("demo")->shape;
    if (embd) shape.n_embd = embd;
    return synth::build_model(shape, "f16");
}

std::string refusal(const gguf::Model& adapter, const gguf::Model& model) {
    try {
        read_lora(adapter, model);
    } catch (const std::runtime_error& e) {
        return e.what();
    }
    return "";
}

TEST(Lora, AnAdapterIsItsPairsInTheShapesOfTheWeightsTheyAdapt) {
    const auto m = demo();
    const auto a = read_lora(synth::build_lora(m, 8, {"attn_q", "ffn_up", "output", "token_embd"}), m);
    const auto layers = synth::find_preset("demo")->shape.n_layer;
    ASSERT_EQ(a.pairs.size(), 2 * layers + 2);
    EXPECT_EQ(a.alpha, 8.0f);
    for (const auto& p : a.pairs) {
        EXPECT_EQ(p.rank(), 8u) << p.base;
        const auto* w = m.find_tensor(p.base);
        ASSERT_NE(w, nullptr) << p.base;
        if (p.base == "token_embd.weight") {
            EXPECT_EQ(p.width_out(), w->dims[0]);  // the model's width, rows gathered from A
        } else {
            EXPECT_EQ(p.width_in(), w->dims[0]) << p.base;
            EXPECT_EQ(p.width_out(), w->dims[1]) << p.base;
        }
    }
}

TEST(Lora, WhatTheLoaderRefusesIsRefusedWithItsReason) {
    const auto m = demo();
    const auto good = synth::build_lora(m, 8, {"attn_q"});
    EXPECT_EQ(refusal(good, m), "");

    EXPECT_THAT(refusal(m, m), HasSubstr("not 'adapter'"));  // a model is not an adapter
    auto other_arch = good;
    other_arch.metadata.set("general.architecture", gguf::Value::str("qwen3"));
    EXPECT_THAT(refusal(other_arch, m), HasSubstr("architecture 'qwen3'"));
    auto half = good;
    half.tensors.pop_back();  // the last lora_b
    EXPECT_THAT(refusal(half, m), HasSubstr("lacks its lora_b"));
    auto odd = good;
    odd.tensors.back().name = "blk.0.attn_q.weight.delta";
    EXPECT_THAT(refusal(odd, m), HasSubstr("unexpected suffix"));
    // Made for a model of another width: the loader's "incorrect shape".
    EXPECT_THAT(refusal(synth::build_lora(demo(1024), 8, {"attn_q"}), m), HasSubstr("another base model"));
    auto no_pairs = good;
    no_pairs.tensors.clear();
    EXPECT_THAT(refusal(no_pairs, m), HasSubstr("no lora_a / lora_b pairs"));
}

std::uint64_t pair_bytes(const std::vector<LoraPair>& pairs) {
    std::uint64_t n = 0;
    for (const auto& p : pairs) n += p.a.n_bytes() + p.b.n_bytes();
    return n;
}

TEST(Lora, OnTheCpuThePairsTheirActivationsAndTheLoadBufferAreBooked) {
    const auto m = demo();
    Settings st;
    const auto without = make_plan(m, st);
    st.lora = read_lora(synth::build_lora(m, 16, {"attn_q", "attn_v", "ffn_up", "ffn_down"}), m).pairs;
    const auto with = make_plan(m, st);
    const auto* cpu = with.find("cpu");
    ASSERT_NE(cpu, nullptr);
    // The pinned engine on this file (tests/integration/plan): "CPU_Mapped LoRA buffer size" is the pairs'
    // bytes, and the compute buffer grows by less than the activations booked.
    EXPECT_GE(cpu->adapters.bytes, pair_bytes(st.lora) + lora_compute_bytes(st.lora, 512, 1));
    EXPECT_EQ(cpu->total() - without.find("cpu")->total(), cpu->adapters.bytes);
    EXPECT_THAT(cpu->adapters.detail, HasSubstr("LoRA"));
    // Nothing else of the plan changes.
    EXPECT_EQ(cpu->weights.bytes, without.find("cpu")->weights.bytes);
    EXPECT_EQ(cpu->compute.bytes, without.find("cpu")->compute.bytes);
}

TEST(Lora, PairsFollowTheirLayersBetweenGpuAndHost) {
    const auto m = demo();
    const auto layers = synth::find_preset("demo")->shape.n_layer;
    Settings st;
    st.gpus = {"cuda0"};
    st.n_gpu_layers = static_cast<int>(layers / 2);  // the first half of the layers stay on the host
    st.lora = read_lora(synth::build_lora(m, 16, {"attn_q", "token_embd"}), m).pairs;
    const auto p = make_plan(m, st);
    std::vector<LoraPair> host, gpu;
    for (const auto& x : st.lora) {
        const bool on_host = x.base == "token_embd.weight" || x.base.starts_with("blk.0.") ||
                             x.base.starts_with("blk.1.") || x.base.starts_with("blk.2.") ||
                             x.base.starts_with("blk.3.");
        (on_host ? host : gpu).push_back(x);
    }
    ASSERT_EQ(layers, 8u) << "the split above assumes the demo's 8 layers";
    const auto* cuda = p.find("cuda0");
    const auto* cpu = p.find("cpu");
    ASSERT_TRUE(cuda && cpu);
    EXPECT_GE(cuda->adapters.bytes, pair_bytes(gpu) + lora_compute_bytes(st.lora, 512, 1));
    EXPECT_LT(cuda->adapters.bytes, pair_bytes(gpu) + lora_compute_bytes(st.lora, 512, 1) + 4 * kMiB);
    EXPECT_GE(cpu->adapters.bytes, pair_bytes(host) + lora_compute_bytes(st.lora, 512, 1));

    // All layers on the GPU: only token_embd's pair (and the load buffer) stays on the host.
    st.n_gpu_layers = -1;
    const auto full = make_plan(m, st);
    EXPECT_GT(full.find("cuda0")->adapters.bytes, cuda->adapters.bytes);
    EXPECT_LT(full.find("cpu")->adapters.bytes, cpu->adapters.bytes);
}

TEST(Lora, UnquantizedPairsOnAGpuLoadCublasKernelsEvenForAQuantizedModel) {
    auto shape = synth::find_preset("demo")->shape;
    const auto m = synth::build_model(shape, "q8_0");
    Settings st;
    st.gpus = {"cuda0"};
    st.flash_attn = FlashAttn::on;
    const auto base = make_plan(m, st).find("cuda0")->overhead.bytes;
    st.lora = read_lora(synth::build_lora(m, 16, {"attn_q"}), m).pairs;
    EXPECT_GE(make_plan(m, st).find("cuda0")->overhead.bytes, base + kCublasGemmGrowthBytes);
}

TEST(Lora, TheDryRunCandidateAddsTheAdaptersItNeverLoads) {
    const auto m = demo();
    Settings st;
    st.lora = read_lora(synth::build_lora(m, 16, {"attn_q"}), m).pairs;
    const auto p = make_plan(m, st);
    const auto* cpu = p.find("cpu");
    DryRunResult dry;
    dry.devices.push_back({"CPU", "cpu", {}, {}, {}});
    const auto c = dry_run_candidate(dry, true, cpu, 0);
    EXPECT_GE(c.leaves_out, cpu->adapters.bytes + cpu->overhead.bytes);
}

}  // namespace
}  // namespace loch::plan
