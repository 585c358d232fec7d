// Exit classification on captured logs and wait statuses (the texts are what this llama.cpp prints).
#include "engines/exit.hpp"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <csignal>
#include <nlohmann/json.hpp>

namespace loch::engines {
namespace {

using ::testing::HasSubstr;

int exited_with(int code) {
    return (code & 0xff) << 8;
}  // what waitpid reports for exit(code)
int killed_by(int sig) {
    return sig;
}

TEST(ClassifyExit, SegfaultReadsLikeTheShell) {
    const std::vector<std::string> log{"srv  update_slots: all slots are idle", "some line"};
    const auto r = classify_exit({killed_by(SIGSEGV)}, log);
    EXPECT_EQ(r.kind, ExitKind::signal);
    EXPECT_EQ(r.signal, SIGSEGV);
    EXPECT_FALSE(r.exit_code.has_value());
    EXPECT_EQ(r.signal_name, "SIGSEGV");
    EXPECT_EQ(r.summary, "exit 139 / SIGSEGV");
    EXPECT_EQ(r.log_tail, log);
    EXPECT_TRUE(r.is_failure());
}

TEST(ClassifyExit, CudaOutOfMemoryFromTheBaselineLog) {
    // llama-server with --fit off on a model that does not fit (docs/../shared reference, H200).
    const std::vector<std::string> log{
        "llama_kv_cache: layer   0: dev = CUDA0",
        "ggml_backend_cuda_buffer_type_alloc_buffer: allocating 163840.00 MiB on device 0: cudaMalloc "
        "failed: out of "
        "memory",
        "alloc_tensor_range: failed to allocate CUDA0 buffer of size 171798691840",
        "llama_init_from_model: failed to initialize the context: failed to allocate buffer for kv cache",
        "srv    load_model: failed to load model, '/m/70b.gguf'",
        "main: exiting due to model loading error",
    };
    const auto r = classify_exit({exited_with(1)}, log);
    EXPECT_EQ(r.kind, ExitKind::out_of_memory);
    EXPECT_EQ(r.exit_code, 1);
    // The first failure of the burst, the one with the numbers.
    EXPECT_THAT(r.matched_line,
                HasSubstr("allocating 163840.00 MiB on device 0: cudaMalloc failed: out of memory"));
    EXPECT_THAT(r.summary, HasSubstr("out of memory: "));
    EXPECT_THAT(r.summary, HasSubstr("(exit 1)"));
}

TEST(ClassifyExit, EveryOomPatternIsRecognised) {
    for (const std::string line : {
             "ggml_backend_cuda_buffer_type_alloc_buffer: allocating 1.00 MiB on device 0: cudaMalloc "
             "failed: out of memory",
             "ggml_backend_cpu_buffer_type_alloc_buffer: failed to allocate buffer of size 1234",
             "ggml_gallocr_reserve_n: failed to allocate ROCm0 buffer of size 99",
             "hipMalloc failed: hipErrorOutOfMemory",
             "terminate called after throwing an instance of 'std::bad_alloc'",
             "vk::Device::allocateMemory: ErrorOutOfDeviceMemory",
             "llama_model_load: error loading model: unable to allocate CUDA0 buffer",
             "CUDA error: out of memory",
         }) {
        EXPECT_TRUE(find_oom_line(std::vector<std::string>{"ok", line}).has_value()) << line;
        EXPECT_EQ(classify_exit({killed_by(SIGABRT)}, std::vector<std::string>{line}).kind,
                  ExitKind::out_of_memory)
            << line;
    }
    for (const std::string line :
         {"llama_context: CUDA0 compute buffer size = 112.00 MiB", "memory breakdown ok",
          "srv  log_server_r: request: GET /health 127.0.0.1 200"}) {
        EXPECT_FALSE(find_oom_line(std::vector<std::string>{line}).has_value()) << line;
    }
}

TEST(ClassifyExit, SigkillNotSentByLochIsLikelyTheOomKiller) {
    const auto r = classify_exit({killed_by(SIGKILL)}, {});
    EXPECT_EQ(r.kind, ExitKind::out_of_memory);
    EXPECT_EQ(r.signal, SIGKILL);
    EXPECT_THAT(r.summary, HasSubstr("exit 137 / SIGKILL"));
    EXPECT_THAT(r.summary, HasSubstr("OOM killer"));
}

TEST(ClassifyExit, StopAndTimeoutAreNotCrashes) {
    const auto stopped = classify_exit({killed_by(SIGTERM), true, false}, {});
    EXPECT_EQ(stopped.kind, ExitKind::stopped);
    EXPECT_FALSE(stopped.is_failure());
    // Killed by loch with SIGKILL during a stop: still a stop, never "OOM killer".
    EXPECT_EQ(classify_exit({killed_by(SIGKILL), true, false}, {}).kind, ExitKind::stopped);
    const auto timeout = classify_exit({killed_by(SIGKILL), false, true}, {});
    EXPECT_EQ(timeout.kind, ExitKind::startup_timeout);
    EXPECT_TRUE(timeout.is_failure());
}

TEST(ClassifyExit, BadModelFileNamesTheRootCause) {
    // The pinned llama-server at -lv 4 on a truncated GGUF: the first error of the last burst is the cause.
    const std::vector<std::string> log{
        "0.00.040.598 W srv  llama_server: security: no API key is set",
        "0.00.042.558 I srv    load_model: loading model 'bad.gguf'",
        "0.00.042.699 E gguf_init_from_reader: failed to read header",
        "0.00.042.864 E llama_model_load: error loading model: llama_model_loader: failed to load model from "
        "bad.gguf",
        "0.00.042.917 E llama_model_load_from_file_impl: failed to load model",
        "0.00.043.001 E srv    load_model: failed to load model, 'bad.gguf'",
        "0.00.043.045 I srv    operator(): operator(): cleaning up before exit...",
        "0.00.060.481 E srv  llama_server: exiting due to model loading error",
    };
    const auto r = classify_exit({exited_with(1)}, log);
    EXPECT_EQ(r.kind, ExitKind::exit_code);
    EXPECT_EQ(r.exit_code, 1);
    EXPECT_EQ(r.matched_line, "gguf_init_from_reader: failed to read header");
    EXPECT_EQ(r.summary, "exit 1: gguf_init_from_reader: failed to read header");
    // Without llama.cpp's prefixes, words decide.
    const auto plain = classify_exit(
        {exited_with(2)}, std::vector<std::string>{"starting", "fatal error: bad flag", "usage: x"});
    EXPECT_EQ(plain.matched_line, "fatal error: bad flag");
}

// Issue 26: a setting the engine refuses at context creation. Its own line comes first, then lines that are
// no errors, then the consequences every failed start prints: the summary names the cause, found by content.
TEST(ClassifyExit, ARefusedSettingNamesTheEnginesOwnLineNotItsConsequences) {
    for (const bool prefixed : {true, false}) {
        const std::string e = prefixed ? "0.01.000.100 E " : "", i = prefixed ? "0.01.000.200 I " : "";
        const std::vector<std::string> log{
            i + "llama_model_loader: - kv  30: deepseek2.attention.kv_lora_rank u32 = 512",
            e + "llama_init_from_model: model does not support different K (q8_0) and V (f16) cache types",
            i + "llama_model_loader: unloading",
            i + "print_info: freeing the model",
            i + "llama_memory_breakdown_print: | memory breakdown [MiB] |",
            i + "llama_memory_breakdown_print: |   - Host | 120 = 100 + 0 + 20 |",
            e + "common_init_from_params: failed to create context with model 'mla.gguf'",
            e + "srv    load_model: failed to load model, 'mla.gguf'",
            i + "srv    operator(): operator(): cleaning up before exit...",
            e + "srv  llama_server: exiting due to model loading error",
        };
        const auto r = classify_exit({exited_with(1)}, log);
        EXPECT_EQ(r.matched_line,
                  "llama_init_from_model: model does not support different K (q8_0) and V (f16) cache types")
            << (prefixed ? "with" : "without") << " llama.cpp's prefixes";
    }
}

TEST(ClassifyExit, PortInUseAndCleanExit) {
    const auto r =
        classify_exit({exited_with(1)},
                      std::vector<std::string>{
                          "srv    start: couldn't bind HTTP server socket, hostname: 127.0.0.1, port: 8080"});
    EXPECT_EQ(r.kind, ExitKind::port_in_use);
    const auto c = classify_exit({exited_with(0)}, {});
    EXPECT_EQ(c.kind, ExitKind::exited);
    EXPECT_EQ(c.exit_code, 0);
}

TEST(ClassifyExit, TailIsBoundedAndJsonCarriesNumbers) {
    std::vector<std::string> log;
    for (int i = 0; i < 100; ++i) log.push_back("line " + std::to_string(i));
    const auto r = classify_exit({killed_by(SIGSEGV)}, log, 5);
    ASSERT_EQ(r.log_tail.size(), 5u);
    EXPECT_EQ(r.log_tail.front(), "line 95");
    EXPECT_EQ(r.log_tail.back(), "line 99");
    const nlohmann::json j = r;
    EXPECT_EQ(j["kind"], "signal");
    EXPECT_EQ(j["signal"], 11);
    EXPECT_EQ(j["signal_name"], "SIGSEGV");
    EXPECT_TRUE(j["exit_code"].is_null());
    EXPECT_EQ(j["log_tail"].size(), 5u);
    EXPECT_EQ(signal_name(77), "signal 77");
}

}  // namespace
}  // namespace loch::engines
