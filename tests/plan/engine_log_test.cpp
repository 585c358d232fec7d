// The llama-server log parser (measured footprint) and the llama-fit-params output parser.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "plan/dry_run.hpp"
#include "plan/engine_log.hpp"

namespace loch::plan {
namespace {

// Lines as the pinned llama-server prints them with -lv 4 on an H200 (CUDA build), with the log prefix.
constexpr const char* kCudaLog = R"(0.00.512.100 I load_tensors: offloading output layer to GPU
0.00.512.101 I load_tensors: offloading 32 repeating layers to GPU
0.00.512.102 I load_tensors: offloaded 33/33 layers to GPU
0.00.512.103 I load_tensors:   CPU_Mapped model buffer size =   281.81 MiB
0.00.512.104 I load_tensors:        CUDA0 model buffer size =  4026.12 MiB
0.01.100.000 I llama_context:  CUDA_Host  output buffer size =     0.49 MiB
0.01.100.001 I llama_kv_cache:      CUDA0 KV buffer size =   512.00 MiB
0.01.100.002 I llama_kv_cache: size =  512.00 MiB (  4096 cells,  32 layers,  1/1 seqs), K (f16):  256.00 MiB, V (f16):  256.00 MiB
0.01.200.000 I sched_reserve:      CUDA0 compute buffer size =   112.01 MiB
0.01.200.001 I sched_reserve:  CUDA_Host compute buffer size =    16.02 MiB
garbage line with buffer size = lots MiB
0.09.000.000 I common_memory_breakdown_print: | memory breakdown [MiB] | total   free    self   model   context   compute    unaccounted |
0.09.000.001 I common_memory_breakdown_print: |   - CUDA0 (H200)       | 143771 = 138531 + (4650 = 4026 +     512 +     112) +         590 |
0.09.000.002 I common_memory_breakdown_print: |   - Host               |                   297 =   281 +       0 +      16                |
)";

TEST(EngineLog, Reads_every_buffer_per_device) {
    const auto fp = parse_engine_log(kCudaLog);
    ASSERT_TRUE(fp.any());
    ASSERT_EQ(fp.layers_offloaded, 33);
    ASSERT_EQ(fp.layers_offloadable, 33);
    const auto* cuda = fp.find_buffer("CUDA0");
    ASSERT_NE(cuda, nullptr);
    EXPECT_EQ(cuda->device, "cuda0");
    EXPECT_EQ(cuda->model, static_cast<std::uint64_t>(4026.12 * 1048576 + 0.5));
    EXPECT_EQ(cuda->kv, 512 * kMiB);
    EXPECT_EQ(cuda->compute, static_cast<std::uint64_t>(112.01 * 1048576 + 0.5));
    const auto* host = fp.find_buffer("CUDA_Host");
    ASSERT_NE(host, nullptr);
    EXPECT_EQ(host->device, "cpu");
    EXPECT_EQ(host->output, static_cast<std::uint64_t>(0.49 * 1048576 + 0.5));
    EXPECT_EQ(fp.find_buffer("CPU_Mapped")->device, "cpu");
    EXPECT_EQ(fp.device_total("cuda0").bytes, cuda->total());
    EXPECT_EQ(fp.device_total("cuda0").source, Source::measured);
    EXPECT_EQ(fp.devices(), (std::vector<std::string>{"cuda0", "cpu"}));
    ASSERT_EQ(fp.kv_caches.size(), 1u);
    EXPECT_EQ(fp.kv_caches[0].cells, 4096u);
    EXPECT_EQ(fp.kv_caches[0].layers, 32u);
    EXPECT_EQ(fp.kv_caches[0].type_k, "f16");
}

TEST(EngineLog, Reads_the_memory_breakdown_table) {
    const auto fp = parse_engine_log(kCudaLog);
    ASSERT_EQ(fp.breakdown.size(), 2u);
    const auto& g = fp.breakdown[0];
    EXPECT_EQ(g.name, "CUDA0 (H200)");
    EXPECT_FALSE(g.is_host);
    EXPECT_EQ(g.total_mib, 143771);
    EXPECT_EQ(g.free_mib, 138531);
    EXPECT_EQ(g.self_mib, 4650);
    EXPECT_EQ(g.model_mib, 4026);
    EXPECT_EQ(g.context_mib, 512);
    EXPECT_EQ(g.compute_mib, 112);
    EXPECT_EQ(g.unaccounted_mib, 590);
    const auto& h = fp.breakdown[1];
    EXPECT_TRUE(h.is_host);
    EXPECT_EQ(h.self_mib, 297);
    EXPECT_EQ(h.compute_mib, 16);
    EXPECT_FALSE(h.unaccounted_mib.has_value());
}

TEST(EngineLog, A_second_load_replaces_the_first) {
    // --fit on runs a dry run that prints the same buffer lines before the real load.
    std::string log = std::string(kCudaLog) +
                      "load_tensors:        CUDA0 model buffer size =  1000.00 MiB\n"
                      "llama_kv_cache:      CUDA0 KV buffer size =   256.00 MiB\n";
    const auto fp = parse_engine_log(log);
    const auto* cuda = fp.find_buffer("CUDA0");
    ASSERT_NE(cuda, nullptr);
    EXPECT_EQ(cuda->model, 1000 * kMiB);
    EXPECT_EQ(cuda->kv, 256 * kMiB);
    EXPECT_EQ(cuda->compute, 0u);
    EXPECT_EQ(fp.find_buffer("CPU_Mapped"), nullptr);
}

TEST(EngineLog, Iswa_caches_add_up_on_one_device) {
    const auto fp = parse_engine_log(
        "llama_kv_cache:        CPU KV buffer size =     8.00 MiB\n"
        "llama_kv_cache: size =    8.00 MiB (  4096 cells,   2 layers,  1/1 seqs), K (f16):    4.00 MiB, V "
        "(f16):    4.00 MiB\n"
        "llama_kv_cache:        CPU KV buffer size =     3.00 MiB\n"
        "llama_kv_cache: size =    3.00 MiB (   768 cells,   4 layers,  1/1 seqs), K (q8_0):    1.50 MiB, V "
        "(q8_0):    1.50 MiB\n");
    EXPECT_EQ(fp.find_buffer("CPU")->kv, 11 * kMiB);
    ASSERT_EQ(fp.kv_caches.size(), 2u);
    EXPECT_EQ(fp.kv_caches[1].cells, 768u);
    EXPECT_EQ(fp.kv_caches[1].type_v, "q8_0");
}

// A vision projector (--mmproj) prints its own weights and compute buffer after the language model's; its
// "compute buffer size" must not replace the language model's on the same backend.
TEST(EngineLog, The_projector_is_counted_beside_the_language_model_not_over_it) {
    constexpr const char* log = R"(0.00.010.100 I load_tensors:   CPU_Mapped model buffer size =   400.00 MiB
0.00.012.000 I llama_kv_cache:        CPU KV buffer size =    64.00 MiB
0.00.012.992 I sched_reserve:        CPU compute buffer size =   300.50 MiB
0.00.014.455 I clip_model_loader: has vision encoder
0.00.014.563 I clip_ctx: CLIP using CUDA0 backend
0.00.014.697 I load_hparams: projector:          mlp
0.00.014.707 I load_hparams: model size:         595.49 MiB
0.00.014.708 I load_hparams: metadata size:      0.01 MiB
0.00.017.803 I get_dummy_batch: warmup with image size = 336 x 336
0.00.018.002 I reserve_compute_meta:      CUDA0 compute buffer size =    32.88 MiB
0.00.018.003 I reserve_compute_meta:        CPU compute buffer size =     1.29 MiB
0.00.018.021 I srv    load_model: loaded multimodal model, '/m/mmproj.gguf')";
    const auto fp = parse_engine_log(log);
    const auto* cpu = fp.find_buffer("CPU");
    ASSERT_NE(cpu, nullptr);
    EXPECT_EQ(cpu->compute, static_cast<std::uint64_t>(300.50 * kMiB));
    EXPECT_EQ(cpu->projector_compute, static_cast<std::uint64_t>(1.29 * kMiB + 0.5));
    const auto* gpu = fp.find_buffer("CUDA0");
    ASSERT_NE(gpu, nullptr);
    EXPECT_EQ(gpu->projector_weights, static_cast<std::uint64_t>(595.49 * kMiB + 0.5));
    EXPECT_EQ(gpu->projector_compute, static_cast<std::uint64_t>(32.88 * kMiB + 0.5));
    EXPECT_EQ(fp.device_total("cuda0").bytes, gpu->projector_weights + gpu->projector_compute);
}

TEST(EngineLog, Nonsense_and_truncation_are_ignored) {
    for (const char* s :
         {"", "\n\n", "model buffer size = ", " KV buffer size = 12", "X compute buffer size = -5 MiB",
          "offloaded 3/ layers to GPU", "offloaded /4 layers to GPU",
          "common_memory_breakdown_print: | memory breakdown [MiB] |\ncommon_memory_breakdown_print: | - X | "
          "1 = 2 |",
          "llama_kv_cache: size = 1e400 MiB (", "Y compute buffer size = 99999999999999999999 MiB"}) {
        const auto fp = parse_engine_log(s);
        for (const auto& b : fp.buffers) EXPECT_LT(b.total(), std::uint64_t{1} << 62) << s;
        EXPECT_TRUE(fp.breakdown.empty()) << s;
    }
    EXPECT_FALSE(parse_engine_log("hello\nworld\n").any());
}

TEST(EngineLog, Json_carries_bytes_and_source) {
    const nlohmann::json j = parse_engine_log(kCudaLog);
    EXPECT_EQ(j["source"], "measured");
    EXPECT_EQ(j["layers_offloaded"], 33);
    EXPECT_GT(j["device_bytes"]["cuda0"].get<std::uint64_t>(), 4600 * kMiB);
}

TEST(DeviceNames, Buffer_names_map_to_loch_devices) {
    EXPECT_EQ(device_of_buffer("CUDA0"), "cuda0");
    EXPECT_EQ(device_of_buffer("CUDA_Host"), "cpu");
    EXPECT_EQ(device_of_buffer("CPU_REPACK"), "cpu");
    EXPECT_EQ(device_of_buffer("ROCm1"), "rocm1");
    EXPECT_EQ(device_of_buffer("Vulkan0"), "vulkan0");
    EXPECT_EQ(device_of_buffer("Host"), "cpu");
}

TEST(FitPrint, Parses_device_lines_and_skips_the_rest) {
    const auto r = parse_fit_print("-c 4096 -ngl 33\nCUDA0 4026 512 258 \nHost 281 0 16 \n");
    ASSERT_EQ(r.devices.size(), 2u);
    EXPECT_EQ(r.devices[0].device, "cuda0");
    EXPECT_EQ(r.devices[0].model.bytes, 4026 * kMiB);
    EXPECT_EQ(r.devices[0].context.bytes, 512 * kMiB);
    EXPECT_EQ(r.devices[0].compute.bytes, 258 * kMiB);
    EXPECT_EQ(r.devices[0].compute.source, Source::engine_dry_run);
    EXPECT_EQ(r.find("cpu")->total(), 297 * kMiB);
}

TEST(FitPrint, No_device_line_is_an_error_that_quotes_the_output) {
    try {
        parse_fit_print("error: failed to load model\n");
        FAIL();
    } catch (const std::runtime_error& e) {
        EXPECT_NE(std::string(e.what()).find("failed to load model"), std::string::npos);
    }
    EXPECT_THROW(parse_fit_print("CUDA0 1 2\nCUDA0 a b c\nCUDA0 1 2 99999999999999999999999\n"),
                 std::runtime_error);
}

TEST(RunCapture, Missing_program_is_a_clear_error) {
    EXPECT_THROW(run_fit_params("/nonexistent/llama-fit-params", "/tmp/x.gguf", {}), std::runtime_error);
}

}  // namespace
}  // namespace loch::plan
