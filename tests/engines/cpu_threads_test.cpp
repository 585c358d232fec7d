// The threads an engine computes with on the CPU, by placement (Kind::cpu_threads): everything on the CPU
// device; on a GPU only what the settings leave on the CPU.
#include <gtest/gtest.h>

#include "config/config.hpp"
#include "engines/kinds/llama_server.hpp"

using namespace loch;
using namespace loch::engines;

namespace {

config::ModelConfig llama(std::optional<int> ngl, std::vector<std::string> extra = {}) {
    config::ModelConfig m;
    m.name = "m";
    m.engine = "llama-server";
    auto a = std::make_shared<LlamaArgs>();
    a->threads = 3;
    a->n_gpu_layers = ngl;
    a->extra = std::move(extra);
    m.settings = a;
    return m;
}

}  // namespace

TEST(CpuThreads, LlamaOnAGpuComputesOnTheCpuOnlyWhatItsSettingsLeaveThere) {
    const LlamaServerKind kind;
    const Placement cpu;
    const Placement gpu{"nvidia:0", "cuda", 0};
    EXPECT_EQ(kind.cpu_threads(llama(std::nullopt), cpu, 8, 32), 3u);
    EXPECT_EQ(kind.cpu_threads(llama(std::nullopt), gpu, 8, 32), std::nullopt);  // all on the GPU
    EXPECT_EQ(kind.cpu_threads(llama(33), gpu, 8, 32), std::nullopt);            // n_layer + 1: all
    EXPECT_EQ(kind.cpu_threads(llama(32), gpu, 8, 32), 3u);  // the output layer on the CPU
    EXPECT_EQ(kind.cpu_threads(llama(20), gpu, 8, 0), 3u);   // layers unknown: counted
    EXPECT_EQ(kind.cpu_threads(llama(std::nullopt, {"--n-cpu-moe", "4"}), gpu, 8, 32), 3u);
    EXPECT_EQ(kind.cpu_threads(llama(std::nullopt, {"-ot", "exps=CPU"}), gpu, 8, 32), 3u);
    auto defaults = llama(10);
    auto a = std::make_shared<LlamaArgs>(llama_args(defaults));
    a->threads.reset();
    defaults.settings = a;
    EXPECT_EQ(kind.cpu_threads(defaults, gpu, 8, 32), 8u);  // the engine's default: the cores
}
