// The llama-server kind's split (issue 14): what a model needs on each device of a --split-mode layer split,
// from the planner, against the same model on one device. (Against the engine's own buffers on two GPUs:
// bench/h200.sh on nvidia-h200-x2, not run yet.)
#include <gtest/gtest.h>

#include "engines/kinds/llama_server.hpp"
#include "support/synth_model.hpp"

namespace loch::engines {
namespace {

config::ModelConfig model_at(const std::filesystem::path& path) {
    config::ModelConfig m;
    m.name = "llama8b";
    m.path = path;
    LlamaArgs a;
    a.ctx = 16384;
    a.parallel = 2;
    m.settings = std::make_shared<LlamaArgs>(a);
    return m;
}

Placement split_over(std::vector<float> shares) {
    Placement p{"nvidia:0", "cuda", 0, 80 * kGiB};
    p.others = {Placement{"nvidia:1", "cuda", 1, 80 * kGiB}};
    p.shares = std::move(shares);
    return p;
}

TEST(LlamaSplitFormula, EveryWeightLandsOnceAndTheLayersFollowTheShares) {
    test::SynthModel file({"--preset", "llama-3.1-8b"});
    const auto model = model_at(file.path());
    config::Config cfg;
    const LlamaServerKind kind;
    const Need one = kind.formula(cfg, model, {Placement{"nvidia:0", "cuda", 0, 80 * kGiB}}).needs.at(0);

    const auto even = kind.split_formula(cfg, model, split_over({1, 1}));
    ASSERT_EQ(even.size(), 2u);
    EXPECT_EQ(even[0].device, "nvidia:0");
    EXPECT_EQ(even[1].device, "nvidia:1");
    // The weights are split, not copied: together exactly what one device holds.
    EXPECT_EQ(even[0].weights_bytes + even[1].weights_bytes, one.weights_bytes);
    EXPECT_EQ(even[0].kv_bytes + even[1].kv_bytes, one.kv_bytes);
    for (const auto& n : even) {
        EXPECT_GT(double(n.weights_bytes), 0.35 * double(one.weights_bytes)) << n.why;
        EXPECT_LT(double(n.weights_bytes), 0.65 * double(one.weights_bytes)) << n.why;
        EXPECT_LT(n.bytes, one.bytes) << "each part is smaller than the whole";
        EXPECT_EQ(n.source, Source::formula);
        EXPECT_NE(n.why.find("split"), std::string::npos) << n.why;
    }
    // Each device pays its own runtime overhead: the parts add up to more than the whole.
    EXPECT_GT(even[0].bytes + even[1].bytes, one.bytes);

    const auto three_to_one = kind.split_formula(cfg, model, split_over({3, 1}));
    ASSERT_EQ(three_to_one.size(), 2u);
    const double ratio = double(three_to_one[0].weights_bytes) / double(three_to_one[1].weights_bytes);
    EXPECT_GT(ratio, 2.0);
    EXPECT_LT(ratio, 4.5);
}

TEST(LlamaSplitFormula, NoSplitForOneDeviceTheCpuOrAFileThatCannotBePlanned) {
    test::SynthModel file({"--preset", "tiny-llama"});
    config::Config cfg;
    const LlamaServerKind kind;
    EXPECT_TRUE(kind.split_formula(cfg, model_at(file.path()), Placement{"nvidia:0", "cuda", 0}).empty());
    EXPECT_TRUE(kind.split_formula(cfg, model_at(file.path()), Placement{}).empty());
    EXPECT_TRUE(kind.split_formula(cfg, model_at("/nonexistent.gguf"), split_over({1, 1})).empty());
}

// llama-server's prompt cache (args.cache_ram) is host memory: booked where the host's memory is the
// device's (the CPU, an APU), passed to the engine as its limit; off (0) unless set.
TEST(LlamaPromptCache, BookedOnTheCpuAndOnAnApuNotOnADiscreteGpu) {
    test::SynthModel file({"--preset", "tiny-llama"});
    config::Config cfg;
    const LlamaServerKind kind;
    auto off = model_at(file.path());
    auto on = off;
    auto a = std::make_shared<LlamaArgs>(llama_args(off));
    a->cache_ram = 3 * kGiB;
    on.settings = a;
    Placement apu{"amd:card0", "rocm", 0, 96 * kGiB};
    apu.unified = true;
    for (const Placement& host : {Placement{}, apu}) {
        const auto without = kind.formula(cfg, off, {host}).needs.at(0);
        const auto with = kind.formula(cfg, on, {host}).needs.at(0);
        EXPECT_EQ(with.bytes, without.bytes + 3 * kGiB) << host.device;
        EXPECT_NE(with.why.find("prompt cache"), std::string::npos) << with.why;
    }
    const Placement gpu{"nvidia:0", "cuda", 0, 80 * kGiB};
    EXPECT_EQ(kind.formula(cfg, on, {gpu}).needs.at(0).bytes,
              kind.formula(cfg, off, {gpu}).needs.at(0).bytes);
    const auto flag = [](const std::vector<std::string>& argv) {
        const auto it = std::ranges::find(argv, "--cache-ram");
        return it == argv.end() || it + 1 == argv.end() ? std::string("absent") : *(it + 1);
    };
    EXPECT_EQ(flag(llama_server_argv("ls", off, gpu, 1)), "0");  // the engine's 8 GiB default is never left
    EXPECT_EQ(flag(llama_server_argv("ls", on, gpu, 1)), "3072");
}

}  // namespace
}  // namespace loch::engines

namespace loch::engines {
namespace {

// Partial offload: what -ngl leaves on the CPU (the layers' weights, their KV, the CPU buffers) is the host
// RAM part of the GPU's need (Need::host_bytes, booked on `cpu`), and grows as fewer layers go to the GPU;
// fully offloaded there is none; on an APU the same bytes join the device's own need (one pool).
TEST(LlamaPartialOffload, TheLayersLeftOnTheCpuAreTheNeedsHostPart) {
    test::SynthModel file({"--preset", "llama-3.1-8b"});
    config::Config cfg;
    const LlamaServerKind kind;
    const Placement gpu{"nvidia:0", "cuda", 0, 80 * kGiB};
    const auto with_ngl = [&](std::optional<int> ngl) {
        auto model = model_at(file.path());
        auto a = std::make_shared<LlamaArgs>(llama_args(model));
        a->n_gpu_layers = ngl;
        model.settings = a;
        return model;
    };
    const Need all = kind.formula(cfg, with_ngl(std::nullopt), {gpu}).needs.at(0);
    EXPECT_EQ(all.host_bytes, 0u);
    const Need half = kind.formula(cfg, with_ngl(16), {gpu}).needs.at(0);
    const Need quarter = kind.formula(cfg, with_ngl(8), {gpu}).needs.at(0);
    EXPECT_GT(half.host_bytes, 0.35 * double(all.weights_bytes)) << half.host_why;
    EXPECT_GT(quarter.host_bytes, half.host_bytes);
    EXPECT_LT(quarter.bytes, half.bytes);  // and the GPU's part shrinks
    EXPECT_NE(half.host_why.find("16 of 33 layers"), std::string::npos) << half.host_why;

    Placement apu{"rocm:0", "rocm", 0, 96 * kGiB};
    apu.unified = true;
    const Need on_apu = kind.formula(cfg, with_ngl(16), {apu}).needs.at(0);
    EXPECT_EQ(on_apu.host_bytes, 0u);
    EXPECT_GE(on_apu.bytes, half.bytes + half.host_bytes - 64 * kMiB) << on_apu.why;
}

}  // namespace
}  // namespace loch::engines
