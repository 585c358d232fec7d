// Images through loch against the real sd-server (stable-diffusion.cpp, built by scripts/setup.sh) on
// synthetic Flux-layout models (loch-synth --diffusion: zero weights, real tensor names and shapes), asked by
// OpenAI's own Python client. Each case ends with loch's health checks (LochServer's destructor).
#include <fstream>

#include <gtest/gtest.h>

#include "fixtures.hpp"

namespace loch::itest {
namespace {

struct ImageModels {
    test::SynthModel flux{{"--diffusion", "flux-tiny"}, "flux-tiny.gguf"};
    test::SynthModel clip{{"--diffusion", "clip-l", "--type", "q8_0"}, "clip-l.gguf"};
    test::SynthModel taef1{{"--diffusion", "taef1"}, "taef1.gguf"};
};
ImageModels& image_models() {
    static ImageModels m;
    return m;
}

fs::path python() {
    const char* p = std::getenv("LOCH_TEST_PYTHON");
    return p && *p ? fs::path(p) : fs::path("/var/cache/loch/py/bin/python3");
}

std::string flux_entry(const std::string& more = "") {
    const auto& m = image_models();
    return "  - name: flux\n    engine: sd-server\n    path: " + m.flux.path().string() +
           "\n    sd: {clip_l: " + m.clip.path().string() + ", taesd: " + m.taef1.path().string() +
           ", steps: 2, threads: 2, max_size: 512x512}\n" + more;
}

std::pair<int, json> ask(LochServer& loch, const fs::path& dir, const std::string& size) {
    const fs::path log = dir / ("openai-image-" + size + ".log");
    const int rc =
        test::run_to_completion(python(),
                                {(fs::path(LOCH_SOURCE_DIR) / "tests/peers/openai_image.py").string(),
                                 std::to_string(loch.port()), "flux", size},
                                log, 300s);
    std::ifstream in(log);
    std::string out((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    const auto end = out.find_last_not_of('\n');
    const auto start = out.rfind('\n', end);
    return {rc, json::parse(out.substr(start == std::string::npos ? 0 : start + 1, end + 1), nullptr, false)};
}

TEST(Images, A128ImageThroughLochWithTheOpenAIClientAndTheEnginesOwnFigures) {
    test::TempDir dir{"loch-itest-images"};
    LochServer loch(dir.path(), config(dir, "2GiB", flux_entry()));
    const auto [rc, got] = ask(loch, dir.path(), "128x128");
    ASSERT_EQ(rc, 0) << got << loch.log();
    EXPECT_EQ(got["width"], 128);
    EXPECT_EQ(got["height"], 128);
    // What sd-server said it loaded is the measured floor of the reservation.
    const auto e = loch.engine_status("flux");
    ASSERT_TRUE(e.contains("measured")) << e.dump(1);
    EXPECT_EQ(e["measured"]["source"], "measured");
    EXPECT_GE(e["reservation"]["bytes"].get<std::uint64_t>(), e["measured"]["bytes"].get<std::uint64_t>());
}

TEST(Images, ASizeAboveMaxSizeIsRefusedBeforeTheEngineSeesItWithTheNumbers) {
    test::TempDir dir{"loch-itest-images"};
    LochServer loch(dir.path(), config(dir, "2GiB", flux_entry()));
    const auto [rc, got] = ask(loch, dir.path(), "1024x1024");
    EXPECT_EQ(rc, 3) << got;
    EXPECT_EQ(got["status"], 400) << got;
    const auto& err = got["body"]["error"];
    EXPECT_NE(err["message"].get<std::string>().find("max_size 512x512"), std::string::npos) << err;
    EXPECT_EQ(err["width"], 1024);
    EXPECT_GT(err["compute_bytes"].get<std::uint64_t>(), 0u);
    // A chat route to an image model is refused by name, before anything starts.
    const auto r = loch.post("/v1/chat/completions", chat("flux", false, 4));
    EXPECT_EQ(r.status, 400) << r.body;
    EXPECT_NE(r.body.find("does not serve /v1/chat/completions"), std::string::npos) << r.body;
}

}  // namespace
}  // namespace loch::itest
