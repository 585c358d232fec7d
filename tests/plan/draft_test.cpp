// Speculative decoding with a draft model in the plan (plan/draft.hpp): what the engine refuses as a draft
// is refused with its reason, the draft is planned as the context the engine makes for it (the target's
// padded context and slots, f16 KV, one output per slot), and the target's outputs grow with n_max.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "core/memory.hpp"
#include "plan/draft.hpp"
#include "plan/engine_log.hpp"
#include "plan/plan.hpp"
#include "plan/reservation.hpp"
#include "synth/synth.hpp"

namespace loch::plan {
namespace {

using ::testing::HasSubstr;

gguf::Model build(const char* preset, std::uint32_t layers = 0, std::uint32_t vocab = 0) {
    auto shape = synth::find_preset(preset)->shape;
    if (layers) shape.n_layer = layers;
    if (vocab) shape.n_vocab = vocab;
    return synth::build_model(shape, "q8_0");
}

DraftModel draft_of(gguf::Model m, std::uint32_t n_max = kDraftMaxDefault) {
    DraftModel d;
    d.path = "/models/draft.gguf";
    d.model = std::make_shared<const gguf::Model>(std::move(m));
    d.n_max = n_max;
    return d;
}

TEST(Draft, WhatTheEngineRefusesAsADraftIsRefusedWithItsReason) {
    const auto target = build("demo");
    const auto draft = build("demo", 1);
    const auto n_vocab = synth::find_preset("demo")->shape.n_vocab;
    EXPECT_EQ(draft_refusal(draft, target), std::nullopt);
    // The engine's own tolerance: vocabularies may differ in size by 128 tokens when the shared ones match.
    EXPECT_EQ(draft_refusal(build("demo", 1, n_vocab + 128), target), std::nullopt);
    EXPECT_THAT(draft_refusal(build("demo", 1, n_vocab - 129), target).value_or(""),
                HasSubstr("differs by at most 128"));

    auto other_token = draft;
    auto tokens = *other_token.metadata.find("tokenizer.ggml.tokens");
    std::get<gguf::Array>(tokens.data).items[300] = gguf::Value::str("zzzz-not-the-same");
    other_token.metadata.set("tokenizer.ggml.tokens", tokens);
    EXPECT_THAT(draft_refusal(other_token, target).value_or(""), HasSubstr("token 300 differs"));

    auto other_type = draft;
    other_type.metadata.set("tokenizer.ggml.model", gguf::Value::str("gpt2"));
    EXPECT_THAT(draft_refusal(other_type, target).value_or(""), HasSubstr("tokenizer is 'gpt2'"));

    auto other_bos = draft;
    other_bos.metadata.set("tokenizer.ggml.bos_token_id", gguf::Value::u32(7));
    EXPECT_THAT(draft_refusal(other_bos, target).value_or(""), HasSubstr("bos token is 7"));

    // Heads that run on the target's own context are other speculative types.
    auto eagle = draft;
    eagle.metadata.set("general.architecture", gguf::Value::str("eagle3"));
    EXPECT_THAT(draft_refusal(eagle, target).value_or(""), HasSubstr("--spec-type draft-eagle3"));
    auto mtp = draft;
    const auto n = *mtp.arch_uint("block_count");
    gguf::TensorInfo nextn = mtp.tensors.back();
    nextn.name = "blk." + std::to_string(n - 1) + ".nextn.eh_proj.weight";
    mtp.tensors.push_back(nextn);
    EXPECT_THAT(draft_refusal(mtp, target).value_or(""), HasSubstr("multi-token-prediction"));
}

TEST(Draft, TheTargetVerifiesNMaxTokensPerSlotAtOnceUpToItsBatch) {
    EXPECT_EQ(verify_outputs(2048, 1, 3), 4u);
    EXPECT_EQ(verify_outputs(2048, 4, 16), 68u);
    EXPECT_EQ(verify_outputs(64, 8, 16), 64u);
}

TEST(Draft, TheDraftIsPlannedAsTheContextTheEngineMakesForIt) {
    const auto target = build("demo");
    const auto draft = build("tiny-llama", 1, synth::find_preset("demo")->shape.n_vocab);
    Settings st;
    st.n_ctx = 1000;  // padded to 1024, per slot to 512
    st.n_parallel = 2;
    st.type_k = st.type_v = gguf::GgmlType::Q8_0;  // the target's; the draft's cache stays f16
    st.gpus = {"cuda0"};
    const Plan alone = make_plan(target, st);
    st.draft = draft_of(draft, 5);
    const Plan with = make_plan(target, st);

    // The draft's own plan: the target's padded context, the same slots, f16 KV, one output per slot.
    Settings ds = st;
    ds.draft.reset();
    ds.n_ctx = alone.n_ctx;
    ds.type_k = ds.type_v = gguf::GgmlType::F16;
    ds.n_outputs_max = st.n_parallel;
    ds.gpu_overhead_bytes = ds.gpu_engine_host_overhead_bytes = 0;
    const Plan dp = make_plan(draft, ds);
    EXPECT_EQ(dp.n_ctx_seq, 512u);
    ASSERT_GT(dp.find("cuda0")->kv.bytes, 0u);
    EXPECT_EQ(with.find("cuda0")->draft.bytes, dp.find("cuda0")->total());
    EXPECT_THAT(with.find("cuda0")->draft.detail, HasSubstr("KV"));
    // On the host: the draft's outputs and mapped rows, and its samplers (12 bytes a candidate per slot).
    EXPECT_EQ(with.find("cpu")->draft.bytes,
              dp.find("cpu")->total() + draft_sampler_bytes(dp.shape.n_vocab, st.n_parallel));

    // The target verifies 2 x (1 + 5) rows of logits at once; its KV and weights do not change.
    EXPECT_EQ(with.find("cpu")->output.bytes, std::uint64_t{with.shape.n_vocab} * 12 * 4);
    EXPECT_EQ(alone.find("cpu")->output.bytes, std::uint64_t{alone.shape.n_vocab} * 2 * 4);
    EXPECT_EQ(with.find("cuda0")->kv.bytes, alone.find("cuda0")->kv.bytes);
    EXPECT_EQ(with.find("cuda0")->weights.bytes, alone.find("cuda0")->weights.bytes);
    EXPECT_GE(with.find("cuda0")->total(), alone.find("cuda0")->total() + with.find("cuda0")->draft.bytes);

    // The engine's flags say the same; a dry run leaves the draft out, so the reservation adds it.
    const auto args = engine_args(st);
    const auto at = [&](const std::string& flag) {
        const auto it = std::find(args.begin(), args.end(), flag);
        return it == args.end() || it + 1 == args.end() ? std::string() : *(it + 1);
    };
    EXPECT_EQ(at("--spec-type"), "draft-simple");
    EXPECT_EQ(at("--spec-draft-model"), "/models/draft.gguf");
    EXPECT_EQ(at("--spec-draft-n-max"), "5");
    EXPECT_EQ(at("--spec-draft-ngl"), "999");
    EXPECT_EQ(at("--spec-draft-type-k"), "f16");
    DryRunResult dry;
    const auto c = dry_run_candidate(dry, false, with.find("cuda0"), 0);
    EXPECT_GE(c.leaves_out, with.find("cuda0")->draft.bytes);
}

TEST(Draft, OnTheCpuTheDraftIsPlannedThereWithItsRepackedWeights) {
    Settings st;
    st.n_ctx = 2048;
    st.draft = draft_of(build("demo", 1));
    const Plan p = make_plan(build("demo"), st);
    ASSERT_EQ(p.devices.size(), 1u);
    EXPECT_GT(p.devices[0].draft.bytes, build("demo", 1).tensor_bytes());
    EXPECT_EQ(engine_args(st).back(), "f16");
}

TEST(Draft, TheEngineLogKeepsTheDraftsBuffersApartFromTheModels) {
    const std::string log =
        "load_tensors: offloaded 33/33 layers to GPU\n"
        "load_tensors:        CUDA0 model buffer size =  4000.00 MiB\n"
        "llama_kv_cache:      CUDA0 KV buffer size =   512.00 MiB\n"
        "llama_kv_cache: size =  512.00 MiB (  4096 cells,  32 layers,  1/1 seqs), K (f16): 256.00 MiB, V "
        "(f16): "
        "256.00 MiB\n"
        "llama_context:      CUDA0 compute buffer size =   300.00 MiB\n"
        "llama_context:  CUDA_Host  output buffer size =     0.49 MiB\n"
        "common_speculative_init_result: loading draft model '/models/draft.gguf'\n"
        "load_tensors: offloaded 17/17 layers to GPU\n"
        "load_tensors:        CUDA0 model buffer size =   600.00 MiB\n"
        "llama_kv_cache:      CUDA0 KV buffer size =    64.00 MiB\n"
        "llama_kv_cache: size =   64.00 MiB (  4096 cells,  16 layers,  1/1 seqs), K (f16): 32.00 MiB, V "
        "(f16): "
        "32.00 MiB\n"
        "llama_context:      CUDA0 compute buffer size =   100.00 MiB\n"
        "llama_context:  CUDA_Host  output buffer size =     0.25 MiB\n";
    const auto fp = parse_engine_log(log);
    EXPECT_EQ(fp.layers_offloaded, 33);
    ASSERT_EQ(fp.kv_caches.size(), 1u);
    EXPECT_EQ(fp.kv_caches[0].layers, 32u);
    const BufferSizes* gpu = nullptr;
    for (const auto& b : fp.buffers)
        if (b.buffer == "CUDA0") gpu = &b;
    ASSERT_NE(gpu, nullptr);
    EXPECT_EQ(gpu->model, 4000 * kMiB);
    EXPECT_EQ(gpu->compute, 300 * kMiB);
    EXPECT_EQ(gpu->draft_model, 600 * kMiB);
    EXPECT_EQ(gpu->draft(), (600 + 64 + 100) * kMiB);
    EXPECT_EQ(fp.device_total("cuda0").bytes, (4000 + 512 + 300 + 600 + 64 + 100) * kMiB);
    // A restart appends a new load: the last one wins, draft included.
    const auto twice = parse_engine_log(log + log);
    EXPECT_EQ(twice.device_total("cuda0").bytes, fp.device_total("cuda0").bytes);
}

}  // namespace
}  // namespace loch::plan
