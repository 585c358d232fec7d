// The reservation is never under the truth on the CPU, measured after real work: a Q4_K model (its
// weights are mapped *and* repacked into CPU_REPACK), a prompt of several ubatches, then the engine's RSS
// against what loch reserved. Real `loch serve`, the real llama-server, a loch-synth model.
#include <fstream>
#include <thread>

#include <gtest/gtest.h>

#include "fixtures.hpp"

using namespace loch;
using namespace loch::itest;
using namespace std::chrono_literals;
using nlohmann::json;

TEST(Memory, CpuReservationCoversMappedAndRepackedWeightsAfterALongPrompt) {
    const test::SynthModel q4k(
        {"--arch", "llama",      "--layers", "8",      "--embd",    "1024",    "--heads",
         "16",     "--kv-heads", "8",        "--ff",   "4096",      "--vocab", "32000",
         "--ctx",  "8192",       "--quant",  "q4_k_m", "--weights", "small"},
        "q4k.gguf");
    test::TempDir dir("loch-itest-memory");
    LochServer loch(dir.path(),
                    config(dir, "4GiB",
                           model_entry("q4k", q4k.path(),
                                       "    args:\n      ctx: 4096\n      parallel: 1\n      threads: 2\n")));
    // ~2000 tokens: four ubatches of 512, so the compute buffers and allocator pools are at their size.
    std::string words;
    for (int i = 0; i < 750; ++i) words += "w" + std::to_string(i % 50) + " ";
    const json body = {{"model", "q4k"}, {"prompt", words}, {"max_tokens", 8}, {"temperature", 0}};
    auto r = loch.post("/v1/completions", body.dump());
    ASSERT_EQ(r.status, 200) << r.body;
    EXPECT_GE(json::parse(r.body)["usage"]["prompt_tokens"].get<int>(), 1536);
    std::this_thread::sleep_for(2500ms);  // two ticks of per-process sampling

    const auto e = loch.engine_status("q4k");
    const int pid = e["engine"]["pid"].get<int>();
    const std::uint64_t rss = rss_bytes(pid);
    const std::uint64_t reserved = e["reservation"]["bytes"].get<std::uint64_t>();
    const std::uint64_t log_buffers = e["measured"]["bytes"].get<std::uint64_t>();
    // What the engine's log reports misses the mapped file pages (control: the old reservation was under).
    EXPECT_LT(log_buffers, rss) << e.dump(2);
    EXPECT_GE(reserved, rss) << "reserved " << reserved << " < RSS " << rss << "\n" << e.dump(2);
    // Planned before start, not only raised after the fact: the footprint's need covers it too.
    ASSERT_TRUE(e.contains("footprint")) << e.dump(2);
    std::uint64_t planned = 0;
    for (const auto& n : e["footprint"]["needs"])
        if (n["device"] == "cpu") planned = n["bytes"].get<std::uint64_t>();
    std::printf(
        "  q4k on the CPU after %d prompt tokens: RSS %.1f MiB, planned %.1f MiB, reserved %.1f MiB, "
        "engine log buffers %.1f MiB\n",
        json::parse(r.body)["usage"]["prompt_tokens"].get<int>(), rss / 1048576.0, planned / 1048576.0,
        reserved / 1048576.0, log_buffers / 1048576.0);
    EXPECT_GE(planned, rss) << "the plan before start was under the engine's RSS after real work\n"
                            << e.dump(2);
    // Not wildly over either: within 25% + 64 MiB of the truth on this small model.
    EXPECT_LE(planned, rss + rss / 4 + 64ull * 1024 * 1024) << e.dump(2);
}
