// Adapters: config → argv, without a shell.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <algorithm>

#include "engines/command.hpp"
#include "engines/llama_server.hpp"
#include "engines/spec.hpp"

namespace loch::engines {
namespace {

using ::testing::ElementsAre;

// The value after `flag` in argv, or "" if the flag is absent.
std::string after(const std::vector<std::string>& argv, const std::string& flag) {
    const auto it = std::find(argv.begin(), argv.end(), flag);
    return it == argv.end() || it + 1 == argv.end() ? "" : *(it + 1);
}

config::ModelConfig llama_model() {
    config::ModelConfig m;
    m.name = "tiny";
    m.path = "/models/tiny model.gguf";
    m.args.ctx = 8192;
    m.args.parallel = 4;
    return m;
}

TEST(LlamaServerArgv, DefaultsFromTheConfig) {
    LaunchOptions l;
    l.port = 40123;
    const auto argv = llama_server_argv("/opt/loch/bin/llama-server", llama_model(), l);
    EXPECT_EQ(argv[0], "/opt/loch/bin/llama-server");
    EXPECT_EQ(after(argv, "-m"), "/models/tiny model.gguf");  // one argv entry, spaces and all
    EXPECT_EQ(after(argv, "--host"), "127.0.0.1");
    EXPECT_EQ(after(argv, "--port"), "40123");
    EXPECT_EQ(after(argv, "-c"), "8192");
    EXPECT_EQ(after(argv, "-np"), "4");
    EXPECT_EQ(after(argv, "-ngl"), "999");
    EXPECT_EQ(after(argv, "-fa"), "auto");
    EXPECT_EQ(after(argv, "--fit"), "off");  // loch decides placement
    EXPECT_EQ(after(argv, "-lv"), "4");      // buffer sizes are printed only at this verbosity
    EXPECT_EQ(after(argv, "-ctk"), "");
    EXPECT_EQ(after(argv, "--device"), "");
}

TEST(LlamaServerArgv, OptionalArgsPlacementAndExtra) {
    auto m = llama_model();
    m.args.n_gpu_layers = 20;
    m.args.flash_attn = config::FlashAttn::off;
    m.args.cache_type_k = "q8_0";
    m.args.cache_type_v = "f16";
    m.args.ubatch = 256;
    m.args.batch = 1024;
    m.args.threads = 6;
    m.args.extra = {"--mlock", "--temp", "0.5"};
    LaunchOptions l;
    l.port = 1;
    l.n_gpu_layers = 7;  // placement wins over the config
    l.llama_devices = {"CUDA0", "CUDA1"};
    const auto argv = llama_server_argv("ls", m, l);
    EXPECT_EQ(after(argv, "-ngl"), "7");
    EXPECT_EQ(after(argv, "-fa"), "off");
    EXPECT_EQ(after(argv, "-ctk"), "q8_0");
    EXPECT_EQ(after(argv, "-ctv"), "f16");
    EXPECT_EQ(after(argv, "-ub"), "256");
    EXPECT_EQ(after(argv, "-b"), "1024");
    EXPECT_EQ(after(argv, "-t"), "6");
    EXPECT_EQ(after(argv, "--device"), "CUDA0,CUDA1");
    EXPECT_THAT(std::vector<std::string>(argv.end() - 3, argv.end()),
                ElementsAre("--mlock", "--temp", "0.5"));
    l.n_gpu_layers.reset();
    EXPECT_EQ(after(llama_server_argv("ls", m, l), "-ngl"), "20");
}

TEST(CommandArgv, PlaceholdersExpandInsideArguments) {
    config::ModelConfig m;
    m.name = "vllm-7b";
    m.engine = config::EngineKind::command;
    m.path = "/models/qwen";
    m.args.ctx = 2048;
    m.command =
        config::CommandEngine{{"vllm", "serve", "{model_path}", "--port={port}", "--host", "{host}",
                               "--served-model-name", "{model_name}", "--max-model-len={ctx}", "{{literal}}"},
                              "/v1/models",
                              {}};
    LaunchOptions l;
    l.port = 5555;
    EXPECT_THAT(command_argv(m, l),
                ElementsAre("vllm", "serve", "/models/qwen", "--port=5555", "--host", "127.0.0.1",
                            "--served-model-name", "vllm-7b", "--max-model-len=2048", "{literal}"));
    EXPECT_THROW(expand_placeholders("{nope}", {}), std::invalid_argument);
    EXPECT_THROW(expand_placeholders("{port", {{"port", "1"}}), std::invalid_argument);
    EXPECT_THROW(expand_placeholders("a}b", {}), std::invalid_argument);
    // A value that looks like a placeholder or shell syntax stays inert text.
    EXPECT_EQ(expand_placeholders("{model_name}", {{"model_name", "$(rm -rf /){port}"}}),
              "$(rm -rf /){port}");
}

TEST(EngineSpec, BuiltFromConfigWithAFreePortAndASafeLogName) {
    config::Config cfg;
    cfg.llama_server = "/bin/llama-server";
    cfg.log_dir = "/var/log/loch";
    cfg.stop_grace = std::chrono::seconds(3);
    auto m = llama_model();
    m.name = "org:m+1";
    m.startup_timeout = std::chrono::seconds(77);
    const auto s = make_engine_spec(cfg, m);
    EXPECT_GT(s.port, 0);
    EXPECT_EQ(after(s.argv, "--port"), std::to_string(s.port));
    EXPECT_EQ(s.health_path, "/health");
    EXPECT_EQ(s.startup_timeout, std::chrono::seconds(77));
    EXPECT_EQ(s.stop_grace, std::chrono::seconds(3));
    EXPECT_EQ(s.log_file, std::filesystem::path("/var/log/loch/org_m_1.log"));
    EXPECT_EQ(log_file_stem(".."), "model..");
    EXPECT_EQ(log_file_stem("a/../b"), "a_.._b");
}

}  // namespace
}  // namespace loch::engines
