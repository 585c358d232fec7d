// Engine kinds: config + placement → argv and environment (never a shell), footprints, the registry.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <fstream>
#include <functional>
#include <set>

#include "engines/kind.hpp"
#include "engines/kinds/command.hpp"
#include "engines/kinds/llama_server.hpp"
#include "engines/spec.hpp"
#include "gguf/whisper_file.hpp"
#include "support/temp_dir.hpp"

namespace loch::engines {
namespace {

using ::testing::ElementsAre;

// The value after `flag` in argv, or "" if the flag is absent.
std::string after(const std::vector<std::string>& argv, const std::string& flag) {
    const auto it = std::find(argv.begin(), argv.end(), flag);
    return it == argv.end() || it + 1 == argv.end() ? "" : *(it + 1);
}

config::ModelConfig llama_model(const std::function<void(LlamaArgs&)>& set = {}) {
    config::ModelConfig m;
    m.name = "tiny";
    m.path = "/models/tiny model.gguf";
    LlamaArgs a;
    a.ctx = 8192;
    a.parallel = 4;
    if (set) set(a);
    m.settings = std::make_shared<LlamaArgs>(a);
    return m;
}

TEST(LlamaServerArgv, DefaultsFromTheConfig) {
    const Placement gpu{"nvidia:0", "cuda", 0};
    const auto argv = llama_server_argv("/opt/loch/bin/llama-server", llama_model(), gpu, 40123);
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
    EXPECT_EQ(after(argv, "--device"), "CUDA0");
    EXPECT_EQ(after(argv, "--alias"), "tiny");  // answers carry the configured name, not the file path
}

TEST(LlamaServerArgv, NoWarmUpUnlessAProjectorNeedsItsComputeBufferReservedAtLoad) {
    const Placement gpu{"nvidia:0", "cuda", 0};
    const auto has = [](const std::vector<std::string>& argv, const std::string& flag) {
        return std::ranges::find(argv, flag) != argv.end();
    };
    EXPECT_TRUE(has(llama_server_argv("ls", llama_model(), gpu, 1), "--no-warmup"));
    const auto vision =
        llama_server_argv("ls", llama_model([](LlamaArgs& a) { a.mmproj = "/models/mmproj.gguf"; }), gpu, 1);
    EXPECT_TRUE(has(vision, "--mmproj"));
    EXPECT_FALSE(has(vision, "--no-warmup"));
    // args.extra comes last: --warmup there wins over loch's --no-warmup.
    const auto back =
        llama_server_argv("ls", llama_model([](LlamaArgs& a) { a.extra = {"--warmup"}; }), gpu, 1);
    EXPECT_LT(std::ranges::find(back, "--no-warmup") - back.begin(),
              std::ranges::find(back, "--warmup") - back.begin());
}

TEST(LlamaServerArgv, OnlyItsOwnDeviceIsVisibleByTheProbesOrdinalAndIsDeviceZeroInside) {
    const auto m = llama_model();
    const auto cpu = llama_server_argv("ls", m, Placement{}, 1);
    EXPECT_EQ(after(cpu, "--device"), "none");
    EXPECT_EQ(after(cpu, "-ngl"), "0");
    // nvidia:1 is the only device the engine sees (CUDA_VISIBLE_DEVICES=1): inside, it is CUDA0.
    EXPECT_EQ(after(llama_server_argv("ls", m, {"nvidia:1", "cuda", 1}, 1), "--device"), "CUDA0");
    // amd:card1 is the machine's only GPU: HIP calls it 0.
    EXPECT_EQ(after(llama_server_argv("ls", m, {"amd:card1", "rocm", 0}, 1), "--device"), "ROCm0");
    // The Vulkan device shown alone (GGML_VK_VISIBLE_DEVICES=1) is the engine's Vulkan0.
    EXPECT_EQ(after(llama_server_argv("ls", m, {"amd:card1", "vulkan", 1}, 1), "--device"), "Vulkan0");
    EXPECT_EQ(device_environment({"amd:card1", "vulkan", 1}, true).at("GGML_VK_VISIBLE_DEVICES"), "1");
    config::Config cfg;
    cfg.programs["llama-server"] = "/bin/llama-server";
    const auto s = make_engine_spec(cfg, m, {"nvidia:1", "cuda", 1});
    EXPECT_EQ(s.env.at("CUDA_DEVICE_ORDER"), "PCI_BUS_ID");
    // Two engines on two GPUs never touch each other's memory: neither can open a context on the other's.
    EXPECT_EQ(s.env.at("CUDA_VISIBLE_DEVICES"), "1");
    EXPECT_EQ(s.env.at("HIP_VISIBLE_DEVICES"), "-1");
    EXPECT_EQ(make_engine_spec(cfg, m, {"nvidia:0", "cuda", 0}).env.at("CUDA_VISIBLE_DEVICES"), "0");
    EXPECT_EQ(make_engine_spec(cfg, m, Placement{}).env.at("CUDA_VISIBLE_DEVICES"), "-1");  // the CPU
    EXPECT_EQ(s.env.at("LLAMA_API_KEY"), s.api_key);
    EXPECT_EQ(s.kind, "llama-server");
}

TEST(LlamaServerArgv, ASplitSeesItsDevicesInOrderAndSplitsLayersInLochsShares) {
    const auto m = llama_model();
    Placement where{"nvidia:2", "cuda", 2};
    where.others = {Placement{"nvidia:0", "cuda", 0}};
    where.shares = {3, 2};
    const auto argv = llama_server_argv("ls", m, where, 1);
    EXPECT_EQ(after(argv, "--device"), "CUDA0,CUDA1");
    EXPECT_EQ(after(argv, "--split-mode"), "layer");
    EXPECT_EQ(after(argv, "--tensor-split"), "3,2");
    EXPECT_EQ(after(argv, "--main-gpu"), "0");
    config::Config cfg;
    cfg.programs["llama-server"] = "/bin/llama-server";
    // The main device first: inside, nvidia:2 is CUDA0 (compute, output) and nvidia:0 is CUDA1.
    EXPECT_EQ(make_engine_spec(cfg, m, where).env.at("CUDA_VISIBLE_DEVICES"), "2,0");
    EXPECT_EQ(llama_devices(where), (std::vector<std::string>{"CUDA0", "CUDA1"}));
    // One device: no split flags.
    EXPECT_EQ(after(llama_server_argv("ls", m, {"nvidia:2", "cuda", 2}, 1), "--split-mode"), "");
}

TEST(LlamaServerMeasure, ASplitsBuffersAreReadPerDeviceByTheirNamesInsideTheEngine) {
    Placement where{"nvidia:1", "cuda", 1};
    where.others = {Placement{"nvidia:0", "cuda", 0}};
    where.shares = {1, 1};
    const std::vector<std::string> log = {
        "load_tensors:        CUDA0 model buffer size =  1000.00 MiB",
        "load_tensors:        CUDA1 model buffer size =   900.00 MiB",
        "llama_kv_cache:      CUDA0 KV buffer size =   256.00 MiB",
        "llama_kv_cache:      CUDA1 KV buffer size =   256.00 MiB",
        "sched_reserve:      CUDA0 compute buffer size =   300.00 MiB",
    };
    const LlamaServerKind kind;
    const auto figs = kind.measure_split(log, where);
    ASSERT_EQ(figs.size(), 2u);
    ASSERT_TRUE(figs[0] && figs[1]);
    EXPECT_EQ(figs[0]->bytes, (1000 + 256 + 300) * kMiB);  // the main device: nvidia:1 (CUDA0 inside)
    EXPECT_EQ(figs[1]->bytes, (900 + 256) * kMiB);
    EXPECT_EQ(kind.measure(log, where)->bytes, figs[0]->bytes);
}

TEST(LlamaServerArgv, OptionalArgsPlacementAndExtra) {
    const auto m = llama_model([](LlamaArgs& a) {
        a.n_gpu_layers = 20;
        a.flash_attn = FlashAttn::off;
        a.cache_type_k = "q8_0";
        a.cache_type_v = "f16";
        a.ubatch = 256;
        a.batch = 1024;
        a.threads = 6;
        a.extra = {"--mlock", "--temp", "0.5"};
    });
    const auto argv = llama_server_argv("ls", m, {"nvidia:1", "cuda", 1}, 1);
    EXPECT_EQ(after(argv, "-ngl"), "20");
    EXPECT_EQ(after(argv, "-fa"), "off");
    EXPECT_EQ(after(argv, "-ctk"), "q8_0");
    EXPECT_EQ(after(argv, "-ctv"), "f16");
    EXPECT_EQ(after(argv, "-ub"), "256");
    EXPECT_EQ(after(argv, "-b"), "1024");
    EXPECT_EQ(after(argv, "-t"), "6");
    EXPECT_EQ(after(argv, "--device"), "CUDA0");  // nvidia:1, alone in the engine's view
    EXPECT_THAT(std::vector<std::string>(argv.end() - 3, argv.end()),
                ElementsAre("--mlock", "--temp", "0.5"));
    EXPECT_EQ(after(llama_server_argv("ls", m, Placement{}, 1), "-ngl"), "0");  // the CPU: no layer offloaded
}

TEST(CommandArgv, PlaceholdersExpandInsideArguments) {
    config::ModelConfig m;
    m.name = "vllm-7b";
    m.engine = "command";
    m.path = "/models/qwen";
    CommandSettings c;
    c.argv = {"vllm",
              "serve",
              "{model_path}",
              "--port={port}",
              "--host",
              "{host}",
              "--served-model-name",
              "{model_name}",
              "--max-model-len={ctx}",
              "{{literal}}"};
    c.health_path = "/v1/models";
    c.ctx = 2048;
    m.settings = std::make_shared<CommandSettings>(c);
    EXPECT_THAT(command_argv(m, 5555),
                ElementsAre("vllm", "serve", "/models/qwen", "--port=5555", "--host", "127.0.0.1",
                            "--served-model-name", "vllm-7b", "--max-model-len=2048", "{literal}"));
    EXPECT_THROW(expand_placeholders("{nope}", {}), std::invalid_argument);
    EXPECT_THROW(expand_placeholders("{port", {{"port", "1"}}), std::invalid_argument);
    EXPECT_THROW(expand_placeholders("a}b", {}), std::invalid_argument);
    // A value that looks like a placeholder or shell syntax stays inert text.
    EXPECT_EQ(expand_placeholders("{model_name}", {{"model_name", "$(rm -rf /){port}"}}),
              "$(rm -rf /){port}");
}

config::ModelConfig command_model() {
    config::ModelConfig m;
    m.name = "srv";
    m.engine = "command";
    CommandSettings c;
    c.argv = {"/bin/srv", "--port", "{port}"};
    c.health_path = "";
    c.env = {{"MY_FLAG", "1"}};
    m.settings = std::make_shared<CommandSettings>(c);
    return m;
}

TEST(CommandKind, OnlyTheAdmittedDeviceIsVisibleToTheProcess) {
    config::Config cfg;
    const auto m = command_model();
    const auto on_gpu = make_engine_spec(cfg, m, {"nvidia:1", "cuda", 1}, 4000);
    EXPECT_EQ(on_gpu.kind, "command");
    EXPECT_EQ(on_gpu.env.at("CUDA_VISIBLE_DEVICES"), "1");
    EXPECT_EQ(on_gpu.env.at("CUDA_DEVICE_ORDER"), "PCI_BUS_ID");
    EXPECT_EQ(on_gpu.env.at("HIP_VISIBLE_DEVICES"), "-1");
    EXPECT_EQ(on_gpu.env.at("MY_FLAG"), "1");
    EXPECT_EQ(on_gpu.env.at("LOCH_ENGINE_API_KEY"), on_gpu.api_key);
    EXPECT_EQ(on_gpu.health_path, "");  // `health_path: none`: ready when the port accepts
    const auto on_amd = make_engine_spec(cfg, m, {"amd:card1", "rocm", 0}, 4000);
    EXPECT_EQ(on_amd.env.at("HIP_VISIBLE_DEVICES"), "0");
    EXPECT_EQ(on_amd.env.at("ROCR_VISIBLE_DEVICES"), "0");
    EXPECT_EQ(on_amd.env.at("CUDA_VISIBLE_DEVICES"), "-1");
    const auto on_cpu = make_engine_spec(cfg, m, Placement{}, 4000);
    EXPECT_EQ(on_cpu.env.at("CUDA_VISIBLE_DEVICES"), "-1");
    EXPECT_EQ(on_cpu.env.at("HIP_VISIBLE_DEVICES"), "-1");
    // A GPU the probe could not number: the runtime's default, not a guess.
    const auto unnumbered = make_engine_spec(cfg, m, {"amd:card1", "rocm", std::nullopt}, 4000);
    EXPECT_FALSE(unnumbered.env.contains("HIP_VISIBLE_DEVICES"));
    EXPECT_EQ(unnumbered.env.at("CUDA_VISIBLE_DEVICES"), "-1");
}

TEST(CommandKind, FootprintIsTheConfiguredMemoryElseTheSizeOfTheModelsFiles) {
    test::TempDir dir("loch-command-kind");
    std::filesystem::create_directories(dir / "model" / "sub");
    std::ofstream(dir / "model" / "a.safetensors") << std::string(1000, 'x');
    std::ofstream(dir / "model" / "sub" / "b.safetensors") << std::string(500, 'y');
    config::Config cfg;
    cfg.devices["nvidia:0"] = config::DeviceConfig{"nvidia:0", 0, std::nullopt, 7, 0};
    auto m = command_model();
    m.path = dir / "model";
    const std::vector<Placement> where{{"nvidia:0", "cuda", 0}, Placement{}};
    const Footprint by_files = kind_of(m).formula(cfg, m, where);
    ASSERT_EQ(by_files.needs.size(), 2u);
    EXPECT_EQ(by_files.needs[0].bytes, 1500u + 7u);  // every file in the folder, plus the device margin
    EXPECT_EQ(by_files.needs[1].bytes, 1500u);
    EXPECT_EQ(by_files.needs[0].source, Source::formula);
    m.memory = {{"*", 4 * kGiB}, {"cpu", 1 * kGiB}};
    const Footprint configured = kind_of(m).formula(cfg, m, where);
    EXPECT_EQ(configured.needs[0].bytes, 4 * kGiB + 7);
    EXPECT_EQ(configured.needs[1].bytes, 1 * kGiB);
    EXPECT_EQ(configured.needs[0].source, Source::configured);
    EXPECT_EQ(configured.source, Source::configured);
}

TEST(LlamaServerKind, AConfiguredMemoryAboveThePlanIsWhatIsReserved) {
    config::Config cfg;
    auto m = llama_model();
    m.path = "/nonexistent/tiny.gguf";  // no plan: the file size (0) is all the formula knows
    m.memory = {{"nvidia:0", 3 * kGiB}};
    const auto fp = kind_of(m).formula(cfg, m, {{"nvidia:0", "cuda", 0}, Placement{}});
    EXPECT_EQ(fp.needs[0].bytes, 3 * kGiB);
    EXPECT_EQ(fp.needs[0].source, Source::configured);
    EXPECT_EQ(fp.needs[1].bytes, 0u);  // none configured for the CPU
}

TEST(VllmKind, TheGpuFractionIsTheReservationOverTheDevicesTotalAndOnlyThatGpuIsVisible) {
    config::Config cfg;
    cfg.programs["vllm"] = "/opt/vllm/bin/vllm";
    config::ModelConfig m;
    m.name = "qwen";
    m.engine = "vllm";
    m.path = "/srv/hf/qwen";
    m.memory = {{"*", 20 * kGiB}};
    const Placement gpu{"nvidia:1", "cuda", 1, 80 * kGiB};
    const auto s = make_engine_spec(cfg, m, gpu, 4321);
    EXPECT_EQ(s.argv[0], "/opt/vllm/bin/vllm");
    EXPECT_EQ(s.argv[1], "serve");
    EXPECT_EQ(after(s.argv, "--gpu-memory-utilization"), "0.2500");
    EXPECT_EQ(after(s.argv, "--port"), "4321");
    EXPECT_EQ(s.env.at("CUDA_VISIBLE_DEVICES"), "1");
    EXPECT_EQ(s.env.at("VLLM_API_KEY"), s.api_key);
    const auto fp = kind_of(m).formula(cfg, m, {gpu});
    EXPECT_EQ(fp.needs.at(0).bytes, 20 * kGiB);
    EXPECT_EQ(fp.needs.at(0).source, Source::configured);

    // From vllm.gpu_memory_utilization instead: the reservation is that fraction of the total.
    test::TempDir dir("loch-vllm-kind");
    config::LoadContext ctx;
    ctx.cwd = dir.path();
    ctx.check_files = false;
    ctx.kinds = kind_schemas();
    const auto c = config::parse_config(
        "models:\n  - name: q\n    engine: vllm\n    path: /srv/q\n    vllm: {gpu_memory_utilization: 0.5}\n",
        dir / "loch.yaml", ctx);
    const auto& q = c.models.at(0);
    EXPECT_EQ(kind_of(q).formula(c, q, {gpu}).needs.at(0).bytes, 40 * kGiB);
    auto c2 = c;
    c2.programs["vllm"] = "/bin/vllm";
    EXPECT_EQ(after(make_engine_spec(c2, q, gpu, 1).argv, "--gpu-memory-utilization"), "0.5000");
    // Neither memory: nor the fraction: vLLM would take ~90 % of the card — a config error.
    try {
        config::parse_config("models:\n  - name: q\n    engine: vllm\n    path: /srv/q\n", dir / "loch.yaml",
                             ctx);
        ADD_FAILURE() << "accepted";
    } catch (const config::ConfigError& e) {
        EXPECT_THAT(e.what(), ::testing::HasSubstr("needs `memory:`"));
    }
}

TEST(KindRegistry, EveryModelEntryHasExactlyOneKindByName) {
    const auto names = kind_names();
    EXPECT_EQ(std::set<std::string_view>(names.begin(), names.end()).size(), names.size());
    for (const auto n : names) EXPECT_EQ(kind_named(n).name(), n);
    EXPECT_EQ(kind_of(llama_model()).name(), "llama-server");
    EXPECT_EQ(kind_of(command_model()).name(), "command");
    EXPECT_THROW(kind_named("nope"), std::out_of_range);
    // The optional hooks do nothing for a kind that has no use for them.
    EXPECT_FALSE(kind_of(command_model()).measure({"CUDA0 model buffer size = 100.00 MiB"}, {}));
    EXPECT_FALSE(kind_of(command_model()).configured_slot_ctx(command_model()));
    EXPECT_TRUE(kind_of(command_model()).serves(command_model(), "/v1/chat/completions"));
    EXPECT_FALSE(kind_of(command_model()).serves(command_model(), "/v1/images/generations"));
}

TEST(EngineSpec, BuiltFromConfigWithAFreePortAndASafeLogName) {
    config::Config cfg;
    cfg.programs["llama-server"] = "/bin/llama-server";
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

namespace loch::engines {
namespace {

TEST(WhisperServerKind, ArgvRoutesTheTranslationAndTheFootprintPlansTheWorstDecoders) {
    test::TempDir dir("loch-whisper-kind");
    gguf::WhisperHparams tiny;
    gguf::write_whisper(dir.path() / "ggml-tiny.bin", tiny, false);
    config::LoadContext ctx;
    ctx.cwd = dir.path();
    ctx.kinds = kind_schemas();
    ctx.check_files = false;
    auto c = config::parse_config("models:\n  - name: w\n    engine: whisper-server\n    path: " +
                                      (dir.path() / "ggml-tiny.bin").string() +
                                      "\n"
                                      "    whisper: {threads: 3, flash_attention: false, language: auto}\n",
                                  dir / "loch.yaml", ctx);
    c.programs["whisper-server"] = "/opt/bin/whisper-server";
    const auto& m = c.models.at(0);
    const auto& k = kind_of(m);
    const auto cpu = make_engine_spec(c, m, Placement{}, 5555).argv;
    EXPECT_EQ(after(cpu, "-m"), (dir.path() / "ggml-tiny.bin").string());
    EXPECT_EQ(after(cpu, "--port"), "5555");
    EXPECT_EQ(after(cpu, "-t"), "3");
    EXPECT_EQ(after(cpu, "-l"), "auto");
    EXPECT_NE(std::find(cpu.begin(), cpu.end(), "-ng"), cpu.end());  // on the CPU: no GPU
    EXPECT_NE(std::find(cpu.begin(), cpu.end(), "-nfa"), cpu.end());
    const Placement gpu{"nvidia:0", "cuda", 0, 80 * kGiB};
    const auto on_gpu = make_engine_spec(c, m, gpu, 1);
    EXPECT_EQ(std::find(on_gpu.argv.begin(), on_gpu.argv.end(), "-ng"), on_gpu.argv.end());
    EXPECT_EQ(on_gpu.env.at("CUDA_VISIBLE_DEVICES"), "0");
    EXPECT_EQ(on_gpu.health_path, "/health");

    // Both audio routes go to its one inference path; a translation says so in its form.
    EXPECT_TRUE(k.serves(m, "/v1/audio/transcriptions"));
    EXPECT_FALSE(k.serves(m, "/v1/chat/completions"));
    std::string body = "--b\r\nContent-Disposition: form-data; name=\"model\"\r\n\r\nw\r\n--b--\r\n";
    const std::string original = body;
    EXPECT_EQ(k.upstream("/v1/audio/transcriptions", "multipart/form-data; boundary=b", body), "/inference");
    EXPECT_EQ(body, original);
    EXPECT_EQ(k.upstream("/v1/audio/translations", "multipart/form-data; boundary=\"b\"", body),
              "/inference");
    EXPECT_THAT(body, ::testing::HasSubstr("name=\"translate\"\r\n\r\ntrue\r\n--b--\r\n"));

    // The footprint is planned for 5 decoders (the default), on the device it runs on.
    const auto fp = k.formula(c, m, {Placement{}, gpu});
    EXPECT_GT(fp.needs.at(1).bytes, fp.needs.at(0).bytes + 500 * kMiB);  // the CUDA context
    EXPECT_THAT(fp.needs.at(0).why, ::testing::HasSubstr("5 decoders"));
    EXPECT_EQ(fp.needs.at(0).source, Source::formula);
    // What whisper-server printed is read as measured (MB of 10^6 bytes).
    const auto got = k.measure({"whisper_model_load:    CPU total size =    77.11 MB",
                                "whisper_init_state: kv self size  =    3.15 MB",
                                "whisper_init_state: compute buffer (decode) =   95.91 MB"},
                               Placement{});
    ASSERT_TRUE(got);
    EXPECT_EQ(got->bytes, 176'170'000u);
    EXPECT_EQ(got->source, Source::measured);

    // A request over the model's limits is refused from the config alone.
    nlohmann::json req = {{"model", "w"}, {"file", {{"file_bytes", 30u << 20}, {"format", "wav"}}}};
    RequestView v;
    v.body = &req;
    auto no = k.check_before_start(m, v);
    ASSERT_TRUE(no);
    EXPECT_EQ(no->kind, Refusal::Kind::too_large);
    req = {{"model", "w"},
           {"file", {{"file_bytes", 1000}, {"seconds", 5.0}, {"format", "wav"}}},
           {"best_of", "6"}};
    no = k.check_before_start(m, v);
    ASSERT_TRUE(no);
    EXPECT_EQ(no->details["max_decoders"], 5);
    req.erase("best_of");
    EXPECT_FALSE(k.check_before_start(m, v));
    // Issue 27: a file that is not audio is refused by what its bytes are, not passed to whisper-server.
    req["file"] = {{"file_bytes", 1000}, {"format", "png"}, {"filename", "photo.png"}};
    no = k.check_before_start(m, v);
    ASSERT_TRUE(no);
    EXPECT_EQ(no->kind, Refusal::Kind::invalid_request);
    EXPECT_NE(no->message.find("not audio"), std::string::npos) << no->message;
    req["file"] = {{"file_bytes", 1000}, {"filename", "noise.bin"}};
    EXPECT_TRUE(k.check_before_start(m, v));
}

}  // namespace
}  // namespace loch::engines
