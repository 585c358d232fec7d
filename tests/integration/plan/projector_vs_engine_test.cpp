// The vision projector's plan (plan/projector.hpp) against the real pinned llama-server on the CPU, over the
// product of image sizes, tower widths and flash attention: the weights are what clip.cpp loads, and the
// image encoder's compute bound is never under the buffer clip.cpp reserves (nor absurdly over it). The
// parser reads both from the engine's log beside the language model's buffers, which they must not replace.
#include <gtest/gtest.h>

#include <cmath>
#include <tuple>

#include "core/memory.hpp"
#include "gguf/reader.hpp"
#include "plan/engine_log.hpp"
#include "plan/projector.hpp"
#include "support/engine_process.hpp"
#include "support/synth_model.hpp"

namespace loch::plan {
namespace {

struct Tower {
    const char *embd, *heads, *ff;
};

using Params = std::tuple<const char* /*image size*/, Tower, bool /*flash attention*/>;

class ProjectorVsEngine : public ::testing::TestWithParam<Params> {};

TEST_P(ProjectorVsEngine, WeightsExactComputeNeverUnder) {
    const auto& [image, tower, fa] = GetParam();
    test::SynthModel text({"--arch", "llama", "--layers", "1", "--embd", "256", "--heads", "4", "--ff", "256",
                           "--vocab", "1000", "--ctx", "2048", "--weights", "zeros"});
    test::SynthModel mmproj({"--mmproj", "llava-1.5", "--text-embd", "256", "--layers", "3", "--image-size",
                             image, "--embd", tower.embd, "--heads", tower.heads, "--ff", tower.ff},
                            "mmproj.gguf");
    const auto p = plan_projector(gguf::read_model(mmproj.path()));
    test::EngineProcess eng(text.path(), {"--mmproj", mmproj.path().string(), "-fa", fa ? "on" : "off", "-c",
                                          "512", "-lv", "4", "--fit", "off", "-t", "2"});
    eng.stop();
    const auto fp = parse_engine_log(eng.log());
    const auto* cpu = fp.find_buffer("CPU");
    ASSERT_NE(cpu, nullptr) << eng.log();
    ASSERT_GT(cpu->projector_compute, 0u) << eng.log();
    ASSERT_GT(cpu->compute, 0u) << "the language model's compute buffer was lost\n" << eng.log();
    const std::string where =
        std::string(image) + " px, width " + tower.embd + (fa ? ", flash" : ", no flash");
    // "%.2f MiB" in the log.
    EXPECT_NEAR(static_cast<double>(cpu->projector_weights), static_cast<double>(p.weights), 0.006 * kMiB)
        << where;
    const std::uint64_t bound = fa ? p.compute_flash : p.compute_no_flash;
    EXPECT_GE(bound, cpu->projector_compute) << where << ": the plan is under the engine's buffer";
    EXPECT_LE(bound, 2 * cpu->projector_compute + kMiB)
        << where << ": the plan is far over the engine's buffer";
}

INSTANTIATE_TEST_SUITE_P(Cpu, ProjectorVsEngine,
                         ::testing::Combine(::testing::Values("56", "224", "336"),
                                            ::testing::Values(Tower{"64", "4", "256"},
                                                              Tower{"768", "12", "3072"},
                                                              Tower{"1024", "16", "4096"}),
                                            ::testing::Bool()),
                         [](const auto& info) {
                             return std::string("px") + std::get<0>(info.param) + "_w" +
                                    std::get<1>(info.param).embd +
                                    (std::get<2>(info.param) ? "_fa" : "_nofa");
                         });

}  // namespace
}  // namespace loch::plan
