// Done-when of the foundation issue: a tiny loch-synth model of every architecture loads in the real pinned
// llama-server and answers POST /v1/completions; so do the demo model and the main quantizations.
#include <gtest/gtest.h>

#include <cctype>
#include <fstream>
#include <iterator>

#include <nlohmann/json.hpp>

#include "support/engine_process.hpp"
#include "support/synth_model.hpp"
#include "synth/synth.hpp"

namespace loch::test {
namespace {

const std::vector<std::string> kServerArgs = {"-c", "256", "-np", "1", "-t", "2", "--no-webui"};

// Asks for a few tokens and checks the answer is a real completion.
void expect_completion(const EngineProcess& engine, const std::string& what) {
    const auto res = engine.post_json(
        "/v1/completions", R"({"prompt": "Hello, loch! The answer is", "max_tokens": 4, "temperature": 0})");
    ASSERT_EQ(res.status, 200) << what << ": " << res.body;
    const auto body = nlohmann::json::parse(res.body);
    ASSERT_TRUE(body.contains("choices")) << res.body;
    ASSERT_FALSE(body["choices"].empty()) << res.body;
    EXPECT_TRUE(body["choices"][0].contains("text")) << res.body;
    EXPECT_GT(body["usage"]["prompt_tokens"].get<int>(), 1) << "the ASCII prompt must tokenize: " << res.body;
    EXPECT_GE(body["usage"]["completion_tokens"].get<int>(), 1) << res.body;
}

class EveryArchitecture : public ::testing::TestWithParam<std::string> {};

TEST_P(EveryArchitecture, TinyModelLoadsAndAnswersCompletions) {
    const std::string preset = "tiny-" + GetParam();
    auto model = SynthModel::preset(preset);
    EngineProcess engine(model.path(), kServerArgs);
    expect_completion(engine, preset);
    // The engine read the shapes we wrote: same parameter count, vocabulary and width as the library says.
    const auto expected =
        synth::build_model(synth::find_preset(preset)->shape, synth::find_preset(preset)->default_quant);
    const auto models = nlohmann::json::parse(engine.get("/v1/models").body);
    const auto& meta = models["data"][0]["meta"];
    EXPECT_EQ(meta["n_params"].get<std::uint64_t>(), expected.parameter_count()) << meta.dump();
    EXPECT_EQ(meta["n_vocab"].get<std::uint64_t>(), *expected.arch_uint("vocab_size")) << meta.dump();
    EXPECT_EQ(meta["n_embd"].get<std::uint64_t>(), *expected.arch_uint("embedding_length")) << meta.dump();
    EXPECT_EQ(meta["size"].get<std::uint64_t>(), expected.tensor_bytes()) << meta.dump();
}

INSTANTIATE_TEST_SUITE_P(Synth, EveryArchitecture,
                         ::testing::Values("llama", "mixtral", "qwen2", "qwen3", "qwen3moe", "gemma3",
                                           "deepseek2"),
                         [](const auto& info) { return info.param; });

class EveryQuantization : public ::testing::TestWithParam<std::string> {};

TEST_P(EveryQuantization, TinyLlamaLoadsAndAnswers) {
    auto model = SynthModel::preset("tiny-llama", GetParam());
    EngineProcess engine(model.path(), kServerArgs);
    expect_completion(engine, "tiny-llama " + GetParam());
}

INSTANTIATE_TEST_SUITE_P(Synth, EveryQuantization,
                         ::testing::Values("f32", "f16", "bf16", "q8_0", "q4_0", "q4_k", "q4_k_m", "q6_k"),
                         [](const auto& info) { return info.param; });

TEST(Demo, DemoModelAnswers) {
    auto model = SynthModel::preset("demo");
    EngineProcess engine(model.path(), kServerArgs);
    expect_completion(engine, "demo");
}

// The demo answers briefly (synth.hpp, Weights::brief): sampled, an answer ends after a few tokens — so a
// coding agent's turn completes — and greedy decoding never ends, which the suites' long streams rely on.
TEST(Demo, ASampledAnswerEndsWithinAFewTokensAndAGreedyOneRunsToItsLimit) {
    auto model = SynthModel::preset("demo");
    EngineProcess engine(model.path(), kServerArgs);
    int tokens = 0;
    for (int seed = 1; seed <= 10; ++seed) {
        const auto res = engine.post_json(
            "/v1/chat/completions",
            R"({"messages":[{"role":"user","content":"Hello"}],"max_tokens":64,"temperature":1,"seed":)" +
                std::to_string(seed) + "}");
        ASSERT_EQ(res.status, 200) << res.body;
        const auto body = nlohmann::json::parse(res.body);
        EXPECT_EQ(body["choices"][0]["finish_reason"], "stop") << res.body;
        tokens += body["usage"]["completion_tokens"].get<int>();
    }
    EXPECT_LT(tokens, 10 * 16) << "answers should end after a few tokens";
    const auto greedy = engine.post_json(
        "/v1/chat/completions",
        R"({"messages":[{"role":"user","content":"Hello"}],"max_tokens":16,"temperature":0})");
    const auto body = nlohmann::json::parse(greedy.body);
    EXPECT_EQ(body["choices"][0]["finish_reason"], "length") << greedy.body;
    EXPECT_EQ(body["usage"]["completion_tokens"], 16);
}

TEST(Shapes, CustomShapeWithPerLayerKvHeadArrayLoads) {
    // clang-format off
    SynthModel model({"--arch", "qwen3", "--layers", "3", "--embd", "128", "--heads", "4", "--kv-heads", "2,2,2",
                      "--head-dim", "32", "--ff", "256", "--vocab", "300", "--ctx", "512", "--type", "q8_0"});
    // clang-format on
    EngineProcess engine(model.path(), kServerArgs);
    expect_completion(engine, "custom qwen3");
}

TEST(Shapes, SparseZeroWeightsServeToo) {
    SynthModel model({"--preset", "tiny-gemma3", "--weights", "zeros"});
    EngineProcess engine(model.path(), kServerArgs);
    expect_completion(engine, "zeros");
}

TEST(EngineSupport, StopEndsTheEngine) {
    auto model = SynthModel::preset("tiny-llama");
    EngineProcess engine(model.path(), kServerArgs);
    const auto port = engine.port();
    const auto status = engine.stop();
    ASSERT_TRUE(status.has_value());
    EXPECT_THROW(http_get(port, "/health", std::chrono::seconds(2)), std::exception);
}

TEST(EngineSupport, ABrokenModelFailsWithTheEngineLog) {
    TempDir dir;
    const auto bad = dir / "bad.gguf";
    {
        std::ofstream out(bad, std::ios::binary);
        out << "GGUF but not really";
    }
    try {
        EngineProcess::Options opts;
        opts.startup_timeout = std::chrono::seconds(60);
        EngineProcess engine(bad, kServerArgs, opts);
        FAIL() << "a broken model must not become healthy";
    } catch (const std::runtime_error& e) {
        EXPECT_NE(std::string(e.what()).find("did not become healthy"), std::string::npos) << e.what();
        EXPECT_NE(std::string(e.what()).find("log tail"), std::string::npos) << e.what();
    }
}

}  // namespace
}  // namespace loch::test

namespace loch::test {
namespace {

std::vector<std::string> real_presets() {
    std::vector<std::string> names;
    for (const auto& p : synth::list_presets()) {
        if (p.published_params > 0) names.push_back(p.name);
    }
    return names;
}

std::string test_name(const std::string& s) {
    std::string out;
    for (char c : s) out += std::isalnum(static_cast<unsigned char>(c)) ? c : '_';
    return out;
}

class RealShapes : public ::testing::TestWithParam<std::string> {};

// Real-sized presets are too big to run here, but llama-fit-params loads them without allocating (it
// checks every tensor's name and shape against the architecture) and fits them to this machine.
TEST_P(RealShapes, PresetLoadsInLlamaFitParams) {
    SynthModel model({"--preset", GetParam(), "--weights", "zeros"});
    TempDir dir;
    const auto log = dir / "fit.log";
    const int status = run_to_completion(bin_dir() / "llama-fit-params",
                                         {"-m", model.path().string(), "-c", "4096", "-t", "2"}, log);
    std::ifstream in(log);
    const std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    EXPECT_EQ(status, 0) << text;
    EXPECT_EQ(text.find("failed to load model"), std::string::npos) << text;
    EXPECT_NE(text.find("-ngl"), std::string::npos) << "no fitted arguments printed:\n" << text;
}

INSTANTIATE_TEST_SUITE_P(Synth, RealShapes, ::testing::ValuesIn(real_presets()),
                         [](const auto& info) { return test_name(info.param); });

TEST(Cli, BadCombinationsAreRejectedWithNumbers) {
    TempDir dir;
    const auto log = dir / "synth.log";
    const auto exe = bin_dir() / "loch-synth";
    const int status =
        run_to_completion(exe,
                          {"--arch", "llama", "--layers", "2", "--embd", "1000", "--heads", "3", "--ff", "64",
                           "--vocab", "300", "--ctx", "64", "--out", (dir / "x.gguf").string()},
                          log);
    std::ifstream in(log);
    const std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    EXPECT_EQ(status, 2);
    EXPECT_NE(text.find("n_embd 1000 is not divisible by n_head 3"), std::string::npos) << text;
    EXPECT_FALSE(std::filesystem::exists(dir / "x.gguf"));

    EXPECT_EQ(run_to_completion(exe, {"--preset", "no-such", "--out", (dir / "y.gguf").string()}, log), 2);
    EXPECT_EQ(run_to_completion(
                  exe, {"--preset", "tiny-llama", "--quant", "q9", "--out", (dir / "y.gguf").string()}, log),
              2);
    EXPECT_EQ(run_to_completion(exe, {"--list-presets"}, log), 0);
}

}  // namespace
}  // namespace loch::test
