// The vllm engine kind end to end, against a TEST DOUBLE of vLLM's server (tests/doubles/vllm_double.py):
// no GPU and no vLLM in CI. What is checked is loch's side — the argv and environment it starts vLLM with,
// the secret it sends, the refusal of a config that would let vLLM take the whole card.
#include <sys/stat.h>
#include <unistd.h>

#include <fstream>

#include <gtest/gtest.h>

#include "fixtures.hpp"

namespace loch::itest {
namespace {

class VllmKind : public ::testing::Test {
  protected:
    void SetUp() override {
        fs::create_directories(dir.path() / "engines");
        fs::copy_file(fs::path(LOCH_SOURCE_DIR) / "tests/doubles/vllm_double.py",
                      dir.path() / "engines" / "vllm");
        ::chmod((dir.path() / "engines" / "vllm").c_str(), 0755);
        fs::create_directories(dir.path() / "qwen");  // a Hugging Face model folder
        std::ofstream(dir.path() / "qwen" / "model.safetensors") << std::string(4096, 'w');
    }
    std::string yaml(const std::string& entry_extra) const {
        return "listen: 127.0.0.1\nstate_dir: " + (dir.path() / "state").string() +
               "\nengine_dir: " + (dir.path() / "engines").string() +
               "\ndevices:\n  cpu:\n    budget: 1GiB\nmodels:\n  - name: qwen\n    engine: vllm\n    path: " +
               (dir.path() / "qwen").string() + "\n" + entry_extra;
    }
    test::TempDir dir{"loch-itest-vllm"};
};

TEST_F(VllmKind, StartsVllmWithTheSecretAndOnlyItsDeviceAndRelaysTheAnswer) {
    LochServer loch(dir.path(),
                    yaml("    memory: 256MiB\n    vllm: {max_model_len: 2048, max_num_seqs: 2}\n"));
    const auto r = loch.post("/v1/chat/completions", chat("qwen", false, 8));
    ASSERT_EQ(r.status, 200) << r.body << loch.log();
    EXPECT_EQ(json::parse(r.body)["choices"][0]["message"]["content"], "double");

    std::ifstream in(dir.path() / "engines" / "vllm-double.json");
    const json started = json::parse(in);
    const auto argv = started["argv"].get<std::vector<std::string>>();
    ASSERT_GE(argv.size(), 2u);
    EXPECT_EQ(argv[0], "serve");
    EXPECT_EQ(argv[1], (dir.path() / "qwen").string());
    const auto after = [&](const std::string& flag) {
        auto it = std::find(argv.begin(), argv.end(), flag);
        return it == argv.end() || it + 1 == argv.end() ? std::string() : *(it + 1);
    };
    EXPECT_EQ(after("--host"), "127.0.0.1");
    EXPECT_EQ(after("--served-model-name"), "qwen");
    EXPECT_EQ(after("--max-model-len"), "2048");
    EXPECT_EQ(after("--max-num-seqs"), "2");
    // Placed on the CPU: no GPU fraction, and no GPU visible.
    EXPECT_EQ(after("--gpu-memory-utilization"), "");
    EXPECT_EQ(started["env"]["CUDA_VISIBLE_DEVICES"], "-1");
    EXPECT_EQ(started["env"]["HIP_VISIBLE_DEVICES"], "-1");
    EXPECT_TRUE(started["has_api_key"].get<bool>());  // and the 200 above shows loch sent it

    // The reservation is the configured memory.
    const json status = json::parse(loch.get("/loch/status").body);
    for (const auto& e : status["engines"])
        if (e["name"] == "qwen") {
            EXPECT_EQ(e["footprint"]["source"], "configured") << e.dump(2);
            EXPECT_EQ(e["slots"], 2);
        }
    // A prompt plus max_tokens over max_model_len is refused before vLLM sees it.
    const auto too_long = loch.post("/v1/chat/completions", chat("qwen", false, 4096));
    EXPECT_EQ(too_long.status, 400) << too_long.body;
    EXPECT_EQ(json::parse(too_long.body)["error"]["type"], "context_length_exceeded");
}

TEST_F(VllmKind, AConfigThatWouldLetVllmTakeTheWholeCardIsRefusedWithTheFix) {
    std::ofstream(dir.path() / "bad.yaml") << yaml("");
    test::Process loch(bin() / "loch", {"serve", "--config", (dir.path() / "bad.yaml").string()},
                       dir.path() / "bad.log");
    const auto st = loch.wait_for(20s);
    ASSERT_TRUE(st);
    EXPECT_NE(*st, 0);
    EXPECT_NE(loch.log().find("needs `memory:`"), std::string::npos) << loch.log();
    EXPECT_NE(loch.log().find("bad.yaml:8:"), std::string::npos) << loch.log();
}

}  // namespace
}  // namespace loch::itest

namespace loch::itest {
namespace {

// On a GPU (the NVML test double: one H200, 143771 MiB): with a KV budget, loch plans weights + KV +
// overhead, passes the KV bytes and the reservation as the fraction vLLM's start-up check needs, and reads
// what vLLM's log says it took as the measured floor.
TEST_F(VllmKind, WithAKvBudgetTheFlagsComeFromTheLedgerAndTheLogIsMeasured) {
    ::setenv("LOCH_NVML_LIBRARY", LOCH_NVML_DOUBLE, 1);
    // 10 GiB of weights (sparse).
    ASSERT_EQ(::truncate((dir.path() / "qwen" / "model.safetensors").c_str(), 10ll << 30), 0);
    const std::string cfg =
        "listen: 127.0.0.1\nstate_dir: " + (dir.path() / "state").string() +
        "\nengine_dir: " + (dir.path() / "engines").string() +
        "\ndevices:\n  nvidia:0: {margin: 0}\nmodels:\n  - name: qwen\n    engine: vllm\n    path: " +
        (dir.path() / "qwen").string() +
        "\n    devices: [nvidia:0]\n    vllm: {kv_cache_memory: 8GiB, overhead: 2GiB}\n";
    LochServer loch(dir.path(), cfg);
    ::unsetenv("LOCH_NVML_LIBRARY");
    const auto r = loch.post("/v1/chat/completions", chat("qwen", false, 8));
    ASSERT_EQ(r.status, 200) << r.body << loch.log();
    std::ifstream in(dir.path() / "engines" / "vllm-double.json");
    const auto argv = json::parse(in)["argv"].get<std::vector<std::string>>();
    const auto after = [&](const std::string& flag) {
        auto it = std::find(argv.begin(), argv.end(), flag);
        return it == argv.end() || it + 1 == argv.end() ? std::string() : *(it + 1);
    };
    EXPECT_EQ(after("--kv-cache-memory-bytes"), std::to_string(8ull << 30));
    // (10 + 8 + 2) GiB of 143771 MiB: vLLM's check `free ≥ fraction × total` passes exactly when loch's
    // reservation is free.
    const double fraction = std::stod(after("--gpu-memory-utilization"));
    EXPECT_NEAR(fraction, 20.0 * 1024 / 143771, 1e-4);
    const auto e = loch.engine_status("qwen");
    EXPECT_EQ(e["reservation"]["bytes"].get<std::uint64_t>(), 20ull << 30) << e.dump(1);
    ASSERT_TRUE(e.contains("measured")) << e.dump(1);
    EXPECT_EQ(e["measured"]["bytes"].get<std::uint64_t>(), static_cast<std::uint64_t>(19.25 * (1ull << 30)));
}

}  // namespace
}  // namespace loch::itest

namespace loch::itest {
namespace {

// Sleep mode as the cheaper eviction: a vLLM that may sleep is put to sleep (level 1) to make room for
// another, its GPU figure drops to what a sleeper keeps and its weights are booked in host RAM; its next
// request evicts the other and wakes it, with its full reservation booked again first.
TEST_F(VllmKind, AnEvictedSleeperSleepsItsFigureMovesToTheHostAndItWakesForItsNextRequest) {
    ::setenv("LOCH_NVML_LIBRARY", LOCH_NVML_DOUBLE, 1);
    ASSERT_EQ(::truncate((dir.path() / "qwen" / "model.safetensors").c_str(), 10ll << 30), 0);
    const std::string entry = "    engine: vllm\n    path: " + (dir.path() / "qwen").string() +
                              "\n    devices: [nvidia:0]\n    vllm: {kv_cache_memory: 60GiB, overhead: 2GiB";
    const std::string cfg = "listen: 127.0.0.1\nstate_dir: " + (dir.path() / "state").string() +
                            "\nengine_dir: " + (dir.path() / "engines").string() +
                            "\ndevices:\n  nvidia:0: {margin: 0}\nmodels:\n  - name: sleeper\n" + entry +
                            ", sleep_level: 1}\n  - name: other\n" + entry + "}\n";
    LochServer loch(dir.path(), cfg);
    ::unsetenv("LOCH_NVML_LIBRARY");
    const auto reservation = [&](const std::string& device, const std::string& holder) -> std::uint64_t {
        const auto st = loch.status();
        for (const auto& d : st["devices"])
            if (d["device"] == device)
                for (const auto& r : d["reservations"])
                    if (r["engine"] == holder) return r["figure"]["bytes"].get<std::uint64_t>();
        return 0;
    };
    ASSERT_EQ(loch.post("/v1/chat/completions", chat("sleeper", false, 4)).status, 200) << loch.log();
    EXPECT_EQ(reservation("nvidia:0", "sleeper"), 72ull << 30);
    // 72 + 72 GiB do not fit the H200's ~120 GiB free: the sleeper is evicted — by sleeping.
    ASSERT_EQ(loch.post("/v1/chat/completions", chat("other", false, 4)).status, 200) << loch.log();
    EXPECT_EQ(loch.engine_status("sleeper")["state"], "asleep") << loch.engine_status("sleeper").dump(1);
    EXPECT_EQ(reservation("nvidia:0", "sleeper"), 2ull << 30);
    EXPECT_EQ(reservation("cpu", "sleeper#asleep"), 10ull << 30);  // level 1: its weights in host RAM
    // Its next request evicts `other` (no sleep mode: stopped) and wakes it.
    ASSERT_EQ(loch.post("/v1/chat/completions", chat("sleeper", false, 4)).status, 200) << loch.log();
    EXPECT_EQ(loch.engine_status("sleeper")["state"], "ready");
    EXPECT_EQ(loch.engine_status("sleeper")["runs"], 1) << "woken, not restarted";
    EXPECT_EQ(loch.engine_status("other")["state"], "stopped");
    EXPECT_EQ(reservation("nvidia:0", "sleeper"), 72ull << 30);
    EXPECT_EQ(reservation("cpu", "sleeper#asleep"), 0u);
    std::ifstream calls(dir.path() / "engines" / "vllm-double-sleeper.calls");
    std::string all((std::istreambuf_iterator<char>(calls)), std::istreambuf_iterator<char>());
    EXPECT_EQ(all, "/sleep?level=1\n/wake_up\n");
}

}  // namespace
}  // namespace loch::itest
