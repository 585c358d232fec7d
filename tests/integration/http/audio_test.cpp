// Speech through loch against the real whisper-server (whisper.cpp, built by scripts/setup.sh) on synthetic
// Whisper-shaped models (loch-synth --whisper: zero weights, the real shapes and tensor names), asked by
// OpenAI's own Python client with a generated WAV. Each case ends with loch's health checks (LochServer's
// destructor).
#include <chrono>
#include <fstream>
#include <future>

#include <gtest/gtest.h>

#include "fixtures.hpp"

namespace loch::itest {
namespace {

struct AudioModels {
    test::SynthModel tiny{{"--whisper", "whisper-tiny"}, "ggml-tiny.bin"};
    test::SynthModel base{{"--whisper", "whisper-base", "--type", "q8_0"}, "ggml-base-q8_0.bin"};
    // No tensors: whisper.cpp would allocate 3 GB of weights for it; loch must refuse it before that.
    test::SynthModel large{{"--whisper", "whisper-large-v3", "--no-tensors"}, "ggml-large-v3.bin"};
};
AudioModels& audio_models() {
    static AudioModels m;
    return m;
}

std::string whisper_entry(const std::string& name, const fs::path& path, const std::string& more = "") {
    return "  - name: " + name + "\n    engine: whisper-server\n    path: " + path.string() +
           "\n    whisper: {threads: 2" + more + "}\n";
}

std::pair<int, json> ask(LochServer& loch, const fs::path& dir, const std::string& model,
                         const std::string& mode, double seconds, const std::string& format = "json",
                         const std::string& extra = "{}", int n = 0) {
    const fs::path log = dir / ("openai-audio-" + model + "-" + mode + "-" + std::to_string(n) + ".log");
    const int rc = test::run_to_completion(
        python(),
        {(fs::path(LOCH_SOURCE_DIR) / "tests/peers/openai_audio.py").string(), std::to_string(loch.port()),
         model, mode, std::to_string(seconds), format, extra},
        log, 300s);
    std::ifstream in(log);
    std::string out((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    const auto end = out.find_last_not_of('\n');
    const auto start = end == std::string::npos ? std::string::npos : out.rfind('\n', end);
    return {rc, json::parse(out.substr(start == std::string::npos ? 0 : start + 1, end + 1), nullptr, false)};
}

TEST(Audio, TranscriptionAndTranslationThroughLochWithTheOpenAIClient) {
    test::TempDir dir{"loch-itest-audio"};
    LochServer loch(dir.path(), config(dir, "2GiB", whisper_entry("whisper", audio_models().tiny.path())));
    const auto [rc, got] = ask(loch, dir.path(), "whisper", "transcribe", 3.0);
    ASSERT_EQ(rc, 0) << got << loch.log();
    ASSERT_TRUE(got.contains("text") && got["text"].is_string()) << got;
    EXPECT_FALSE(got["text"].get<std::string>().empty()) << got;

    // A translation goes to the same engine path with translate=true in its form.
    const auto [rc2, tr] = ask(loch, dir.path(), "whisper", "translate", 2.0, "verbose_json");
    ASSERT_EQ(rc2, 0) << tr << loch.log();
    // The engine's own figures are the measured floor of the reservation.
    const auto e = loch.engine_status("whisper");
    ASSERT_TRUE(e.contains("measured")) << e.dump(1);
    EXPECT_EQ(e["measured"]["source"], "measured");
    EXPECT_GE(e["reservation"]["bytes"].get<std::uint64_t>(), e["measured"]["bytes"].get<std::uint64_t>());
    // The engine ran it as a translation (its verbose answer names the task).
    EXPECT_EQ(tr.value("task", ""), "translate") << tr;
}

TEST(Audio, ConcurrentRequestsQueueForTheOneEngineAndAllAnswer) {
    test::TempDir dir{"loch-itest-audio-queue"};
    LochServer loch(dir.path(), config(dir, "2GiB", whisper_entry("whisper", audio_models().base.path())));
    std::vector<std::future<std::pair<int, json>>> all;
    for (int i = 0; i < 3; ++i)
        all.push_back(std::async(std::launch::async, [&, i] {
            return ask(loch, dir.path(), "whisper", "transcribe", 2.0 + i, i == 1 ? "text" : "json", "{}", i);
        }));
    for (auto& f : all) {
        const auto [rc, got] = f.get();
        EXPECT_EQ(rc, 0) << got << loch.log();
    }
    EXPECT_EQ(loch.engine_status("whisper")["slots"], 1);
}

TEST(Audio, ALargeModelThatCannotFitIsRefusedAtOnceWithTheNumbers) {
    test::TempDir dir{"loch-itest-audio-large"};
    LochServer loch(dir.path(), config(dir, "2GiB", whisper_entry("large", audio_models().large.path())));
    const auto t0 = std::chrono::steady_clock::now();
    const auto [rc, got] = ask(loch, dir.path(), "large", "transcribe", 1.0);
    EXPECT_LT(std::chrono::steady_clock::now() - t0, 20s);
    ASSERT_EQ(rc, 3) << got;
    EXPECT_EQ(got["status"], 503) << got;
    const auto& err = got["body"]["error"];
    EXPECT_EQ(err["type"], "insufficient_memory") << got;
    // 3.09 GB of weights + KV + compute against a 2 GiB budget: the numbers are in the message.
    EXPECT_NE(err["message"].get<std::string>().find("GiB"), std::string::npos) << got;
    const auto e = loch.engine_status("large");
    EXPECT_EQ(e.value("runs", -1), 0) << "no engine was started\n" << e.dump(1);
}

TEST(Audio, UploadsOverTheLimitsAndTooManyDecodersAreRefusedBeforeTheEngineSeesThem) {
    test::TempDir dir{"loch-itest-audio-limits"};
    LochServer loch(dir.path(),
                    config(dir, "2GiB",
                           whisper_entry("whisper", audio_models().tiny.path(),
                                         ", max_upload: 200KiB, max_duration: 4s, max_decoders: 3")));
    {
        const auto [rc, got] = ask(loch, dir.path(), "whisper", "transcribe", 8.0);  // 256 KB
        ASSERT_EQ(rc, 3) << got;
        EXPECT_EQ(got["status"], 413) << got;
        EXPECT_EQ(got["body"]["error"]["type"], "request_too_large") << got;
    }
    {
        const auto [rc, got] = ask(loch, dir.path(), "whisper", "transcribe", 5.0);  // 160 KB, 5 s
        ASSERT_EQ(rc, 3) << got;
        EXPECT_EQ(got["status"], 400) << got;
        EXPECT_NE(got["body"]["error"]["message"].get<std::string>().find("max_duration"), std::string::npos);
    }
    {
        const auto [rc, got] =
            ask(loch, dir.path(), "whisper", "transcribe", 1.0, "json", R"({"beam_size": 5})");
        ASSERT_EQ(rc, 3) << got;
        EXPECT_EQ(got["status"], 400) << got;
        EXPECT_EQ(got["body"]["error"]["max_decoders"], 3) << got;
        EXPECT_EQ(got["body"]["error"]["beam_size"], 5) << got;
    }
    // Refused from the config alone: no engine was started for any of them.
    const auto cold = loch.engine_status("whisper");
    EXPECT_EQ(cold.value("runs", -1), 0) << cold.dump(1);
    EXPECT_EQ(cold.value("state", ""), "stopped") << cold.dump(1);
    // Within the limits it works, beam search included.
    const auto [rc, got] = ask(loch, dir.path(), "whisper", "transcribe", 2.0, "json", R"({"beam_size": 3})");
    EXPECT_EQ(rc, 0) << got << loch.log();
}

// Issue 27: a model's max_upload above the server's max_body is what its upload routes take (a 1.3 MB WAV
// with max_body 1 MiB and max_upload 4 MiB is transcribed; a chat body of the same size is still refused),
// and a file that is not audio is refused with the reason instead of whisper-server's bare "Invalid request".
TEST(Audio, AModelsMaxUploadRaisesTheBodyLimitOfItsRoutesAndAPictureIsNoAudio) {
    test::TempDir dir{"loch-itest-audio-upload"};
    LochServer loch(dir.path(),
                    config(dir, "2GiB",
                           whisper_entry("whisper", audio_models().tiny.path(), ", max_upload: 4MiB") +
                               model_entry("tiny", models().tiny.path(), kArgs),
                           "max_body: 1MiB\n"));
    {
        const auto [rc, got] = ask(loch, dir.path(), "whisper", "transcribe", 40.0);  // 1.28 MB
        EXPECT_EQ(rc, 0) << got << loch.log();
    }
    const auto big = chat("tiny", false, 1, R"({"padding":")" + std::string(1300 * 1024, 'x') + "\"}");
    const auto r = loch.post("/v1/chat/completions", big);
    EXPECT_EQ(r.status, 413) << r.body;
    EXPECT_NE(r.body.find("max_body"), std::string::npos) << r.body;
    EXPECT_EQ(r.body.find("max_body_bytes"), std::string::npos)
        << "names a key that does not exist: " << r.body;
    EXPECT_EQ(r.headers.count("x-should-retry") ? r.headers.at("x-should-retry") : "", "false");
    {
        const auto [rc, got] = ask(loch, dir.path(), "whisper", "transcribe-png", 1.0);
        ASSERT_EQ(rc, 3) << got;
        EXPECT_EQ(got["status"], 400) << got;
        EXPECT_NE(got["body"]["error"]["message"].get<std::string>().find("not audio"), std::string::npos)
            << got;
        EXPECT_EQ(got["body"]["error"]["format"], "png") << got;
    }
}

TEST(Audio, TheCpuReservationCoversTheEngineAfterBeamSearch) {
    test::TempDir dir{"loch-itest-audio-memory"};
    LochServer loch(dir.path(), config(dir, "2GiB", whisper_entry("whisper", audio_models().base.path())));
    // The worst the config allows: max_decoders 5 (the default) → the decoder KV reallocated at 7×.
    for (const char* extra : {"{}", R"({"beam_size": 5})", R"({"best_of": 5, "temperature": 0.4})"}) {
        const auto [rc, got] = ask(loch, dir.path(), "whisper", "transcribe", 30.0, "json", extra);
        ASSERT_EQ(rc, 0) << got << loch.log();
    }
    const auto e = loch.engine_status("whisper");
    const std::uint64_t rss = rss_bytes(e["engine"]["pid"].get<int>());
    std::uint64_t planned = 0;
    for (const auto& n : e["footprint"]["needs"])
        if (n["device"] == "cpu") planned = n["bytes"].get<std::uint64_t>();
    std::printf("  whisper-base q8_0 on the CPU after beam 5 on 30 s: RSS %.1f MiB, planned %.1f MiB\n",
                rss / 1048576.0, planned / 1048576.0);
    EXPECT_GE(planned, rss) << e.dump(2);
    EXPECT_LE(planned, rss * 2) << "not wildly over either\n" << e.dump(2);
}

}  // namespace
}  // namespace loch::itest
