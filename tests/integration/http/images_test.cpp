// Images through loch against the real sd-server (stable-diffusion.cpp, built by scripts/setup.sh) on
// synthetic Flux-layout models (loch-synth --diffusion: zero weights, real tensor names and shapes), asked by
// OpenAI's own Python client. Each case ends with loch's health checks (LochServer's destructor).
#include <csignal>
#include <fstream>
#include <future>
#include <map>

#include <gtest/gtest.h>
#include <boost/asio/connect.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/write.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>

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

std::string flux_entry(const std::string& more = "", int steps = 2, const std::string& max_size = "512x512") {
    const auto& m = image_models();
    return "  - name: flux\n    engine: sd-server\n    path: " + m.flux.path().string() +
           "\n    sd: {clip_l: " + m.clip.path().string() + ", taesd: " + m.taef1.path().string() +
           ", steps: " + std::to_string(steps) + ", threads: 2, max_size: " + max_size + "}\n" + more;
}

std::string image(const std::string& size) {
    return json{
        {"model", "flux"}, {"prompt", "a lighthouse"}, {"size", size}, {"response_format", "b64_json"}}
        .dump();
}

// The request reservations of `model` on the CPU now ("flux#3" holders in the ledger).
std::vector<json> request_reservations(LochServer& loch, const std::string& model) {
    std::vector<json> out;
    const auto st = loch.status();
    for (const auto& d : st["devices"])
        for (const auto& r : d["reservations"])
            if (r["engine"].get<std::string>().rfind(model + "#", 0) == 0) out.push_back(r);
    return out;
}

// How many images model 'flux''s sd-server drew, by its own log.
int images_generated(const test::TempDir& dir) {
    std::ifstream engine_log(dir.path() / "state" / "logs" / "flux.log");
    const std::string text((std::istreambuf_iterator<char>(engine_log)), std::istreambuf_iterator<char>());
    int generated = 0;
    for (auto at = text.find("generate_image completed"); at != std::string::npos;
         at = text.find("generate_image completed", at + 1))
        ++generated;
    return generated;
}

std::pair<int, json> ask(LochServer& loch, const fs::path& dir, const std::string& size,
                         const std::string& model = "flux", const std::string& mode = "generate") {
    const fs::path log = dir / ("openai-image-" + mode + "-" + size + ".log");
    const int rc =
        test::run_to_completion(python(),
                                {(fs::path(LOCH_SOURCE_DIR) / "tests/peers/openai_image.py").string(),
                                 std::to_string(loch.port()), model, size, mode},
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
    // Seconds per sampling step, from sd-server's own progress line, in /metrics.
    const auto m = loch.get("/metrics");
    EXPECT_NE(m.body.find(R"(loch_image_seconds_per_step_count{model="flux"} 1)"), std::string::npos)
        << m.body;
    // A size the engine rounds up is generated at the rounded size, and the answer says so (it was silent).
    const auto rounded = loch.post("/v1/images/generations", image("120x120"));
    ASSERT_EQ(rounded.status, 200) << rounded.body;
    const auto notice = rounded.header("x-loch-notice");
    ASSERT_TRUE(notice.has_value());
    EXPECT_NE(notice->find("120x120 is generated as 128x128"), std::string::npos) << *notice;
    EXPECT_FALSE(loch.post("/v1/images/generations", image("128x128")).header("x-loch-notice").has_value());
}

TEST(Images, ASizeAboveMaxSizeIsRefusedBeforeTheEngineSeesItWithTheNumbers) {
    test::TempDir dir{"loch-itest-images"};
    LochServer loch(dir.path(), config(dir, "8GiB", flux_entry()));
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

TEST(Images, ASizeThatCanNeverFitBesideTheWeightsIsRefusedAtOnceWithPerComponentNumbersAndAFit) {
    test::TempDir dir{"loch-itest-images"};
    LochServer loch(dir.path(), config(dir, "600MiB", flux_entry("", 2, "2048x2048")));
    ASSERT_EQ(loch.post("/v1/images/generations", image("128x128")).status, 200);  // loaded, warm
    const auto t0 = std::chrono::steady_clock::now();
    const auto r = loch.post("/v1/images/generations", image("1536x1536"));
    const auto took = std::chrono::steady_clock::now() - t0;
    EXPECT_LT(took, 100ms);
    ASSERT_EQ(r.status, 503) << r.body;
    const auto e = json::parse(r.body)["error"];
    EXPECT_EQ(e["type"], "insufficient_memory");
    EXPECT_GT(e["weights"]["text_encoders_bytes"].get<std::uint64_t>(), 0u) << e;
    EXPECT_GT(e["weights"]["diffusion_model_bytes"].get<std::uint64_t>(), 0u);
    EXPECT_GT(e["weights"]["decoder_bytes"].get<std::uint64_t>(), 0u);
    EXPECT_EQ(e["largest_phase"], "decoder");
    ASSERT_FALSE(e["would_help"].empty()) << e;
    EXPECT_NE(e["would_help"][0].get<std::string>().find("it fits at"), std::string::npos) << e;
    EXPECT_NE(e["message"].get<std::string>().find("can ever give"), std::string::npos) << e;
    // Issue 27: a refusal that can never succeed tells the SDKs not to retry it (openai retries 5xx 3 times).
    EXPECT_EQ(r.headers.count("x-should-retry") ? r.headers.at("x-should-retry") : "", "false");
}

// Issue 27: a size above max_size is refused before it waits in the queue (here behind a long generation),
// and the advice names a size within max_size.
TEST(Images, ASizeAboveMaxSizeIsRefusedWithoutWaitingInTheQueue) {
    test::TempDir dir{"loch-itest-images"};
    LochServer loch(dir.path(), config(dir, "2GiB", flux_entry("", 30)));
    ASSERT_EQ(loch.post("/v1/images/generations", image("128x128")).status, 200);  // loaded
    auto busy =
        std::async(std::launch::async, [&] { return loch.post("/v1/images/generations", image("512x512")); });
    std::this_thread::sleep_for(300ms);
    const auto t0 = std::chrono::steady_clock::now();
    const auto r = loch.post("/v1/images/generations", image("1024x768"));
    EXPECT_LT(std::chrono::steady_clock::now() - t0, 1s) << "it waited behind the running generation";
    EXPECT_EQ(r.status, 400) << r.body;
    EXPECT_NE(r.body.find("ask for at most 512x512 (e.g. 512x384 for this shape)"), std::string::npos)
        << r.body;
    EXPECT_EQ(busy.get().status, 200);
}

// Issue 27: AUTOMATIC1111-style clients name no `model` (or the checkpoint in override_settings) and list the
// checkpoints at /sdapi/v1/sd-models.
TEST(Images, A1111ClientsAreRoutedWithoutAModelField) {
    test::TempDir dir{"loch-itest-images"};
    LochServer loch(dir.path(),
                    config(dir, "2GiB", model_entry("chat", models().demo.path(), kArgs) + flux_entry()));
    const auto list = loch.get("/sdapi/v1/sd-models");
    ASSERT_EQ(list.status, 200) << list.body;
    const auto models_json = json::parse(list.body);
    ASSERT_EQ(models_json.size(), 1u) << list.body;  // the image model only, not the chat one
    EXPECT_EQ(models_json[0]["title"], "flux");
    const std::string prompt = R"({"prompt":"a lighthouse","width":128,"height":128,"steps":2)";
    auto r = loch.post("/sdapi/v1/txt2img", prompt + "}");
    ASSERT_EQ(r.status, 200) << r.body;
    EXPECT_FALSE(json::parse(r.body)["images"].empty()) << r.body.substr(0, 200);
    r = loch.post("/sdapi/v1/txt2img",
                  prompt + R"(,"override_settings":{"sd_model_checkpoint":"flux [0a1b2c]"}})");
    EXPECT_EQ(r.status, 200) << r.body.substr(0, 300);
    r = loch.post("/sdapi/v1/txt2img", prompt + R"(,"override_settings":{"sd_model_checkpoint":"sdxl"}})");
    EXPECT_EQ(r.status, 404) << r.body;
    EXPECT_NE(r.body.find("image models: flux"), std::string::npos) << r.body;
}

// Issue 27: an image request whose client left while it waited is dropped when its turn comes: sd-server
// never sees it (it cannot stop a generation once begun).
TEST(Images, AQueuedImageWhoseClientLeftIsDroppedBeforeItStarts) {
    test::TempDir dir{"loch-itest-images"};
    LochServer loch(dir.path(), config(dir, "2GiB", flux_entry("", 12)));
    ASSERT_EQ(loch.post("/v1/images/generations", image("128x128")).status, 200);
    auto busy =
        std::async(std::launch::async, [&] { return loch.post("/v1/images/generations", image("512x512")); });
    std::this_thread::sleep_for(300ms);
    {
        // A client that sends its request, waits a moment in the queue, and goes.
        SseClient gone(loch.port(), "/v1/images/generations", image("256x256"), /*read_head=*/false);
        std::this_thread::sleep_for(300ms);
        gone.close();
    }
    EXPECT_EQ(busy.get().status, 200);
    std::this_thread::sleep_for(500ms);
    const auto e = loch.engine_status("flux");
    EXPECT_EQ(e["active_requests"], 0) << e.dump(1);
    // The engine generated two images (the first and the busy one), not the abandoned one: its own log says.
    const int generated = images_generated(dir);
    EXPECT_EQ(generated, 2) << "the abandoned request reached sd-server";
}

TEST(Images, AQueuedImageIsCancelledButARunningOneIsRefusedWithTheReason) {
    test::TempDir dir{"loch-itest-images"};
    LochServer loch(dir.path(), config(dir, "2GiB", flux_entry("", 12)));
    ASSERT_EQ(loch.post("/v1/images/generations", image("128x128")).status, 200);
    auto busy = std::async(std::launch::async, [&] {
        return loch.post_as("img-run", "/v1/images/generations", image("512x512"));
    });
    ASSERT_FALSE(loch.in_flight("img-run", "running").is_null());
    auto queued = std::async(std::launch::async, [&] {
        return loch.post_as("img-wait", "/v1/images/generations", image("256x256"));
    });
    ASSERT_FALSE(loch.in_flight("img-wait", "queued").is_null());

    // sd-server cannot stop a generation it started: refused, with the reason, and it goes on.
    const auto refused = loch.del("/loch/requests/img-run");
    EXPECT_EQ(refused.status, 409) << refused.body;
    EXPECT_EQ(json::parse(refused.body)["error"]["type"], "not_cancellable") << refused.body;
    EXPECT_EQ(loch.in_flight("img-run", "running", 0s)["cancellable"], false);
    const auto dropped = loch.del("/loch/requests/img-wait");
    EXPECT_EQ(dropped.status, 200) << dropped.body;
    const auto q = queued.get();
    EXPECT_EQ(q.status, 409) << q.body;
    EXPECT_EQ(json::parse(q.body)["error"]["type"], "cancelled") << q.body;
    EXPECT_EQ(busy.get().status, 200);
    std::this_thread::sleep_for(500ms);
    const int generated = images_generated(dir);
    EXPECT_EQ(generated, 2) << "the cancelled request reached sd-server";
}

TEST(Images, AnImageThatFitsOnlyAfterEvictingAnIdleChatModelEvictsItAndIsServed) {
    test::TempDir dir{"loch-itest-images"};
    LochServer loch(
        dir.path(),
        config(dir, "800MiB",
               model_entry("chat", models().demo.path(), kArgs + "    memory: 300MiB\n") + flux_entry()));
    ASSERT_EQ(loch.post("/v1/chat/completions", chat("chat", false, 4)).status, 200);
    ASSERT_EQ(loch.post("/v1/images/generations", image("128x128")).status, 200);
    ASSERT_EQ(loch.engine_status("chat")["state"], "ready");
    // 512²: the tiny decoder's 480 MiB do not fit beside both models; the idle chat model makes room.
    const auto r = loch.post("/v1/images/generations", image("512x512"));
    ASSERT_EQ(r.status, 200) << r.body << loch.log();
    EXPECT_NE(loch.engine_status("chat")["state"], "ready");
    bool evicted = false;
    const auto st = loch.status();  // (a member of a temporary would dangle in the loop)
    for (const auto& ev : st["events"]) evicted |= ev["kind"] == "evict" && ev["model"] == "chat";
    EXPECT_TRUE(evicted) << st["events"].dump(1);
    EXPECT_TRUE(request_reservations(loch, "flux").empty());  // released once the image came back
}

TEST(Images, TwoImageRequestsQueueNeverConcurrentWhileAChatModelKeepsAnswering) {
    test::TempDir dir{"loch-itest-images"};
    LochServer loch(dir.path(), config(dir, "2GiB",
                                       model_entry("chat", models().demo.path(), kArgs) + flux_entry("", 6)));
    ASSERT_EQ(loch.post("/v1/images/generations", image("128x128")).status, 200);
    auto a =
        std::async(std::launch::async, [&] { return loch.post("/v1/images/generations", image("256x256")); });
    auto b =
        std::async(std::launch::async, [&] { return loch.post("/v1/images/generations", image("256x256")); });
    bool saw_queue = false;
    int max_active = 0;
    // The chats are sent beside the sampling, not in its loop: on this 2-core CPU a chat waits for the
    // image's threads (broker/cpu_threads), and a loop blocked on it would sample only between images.
    std::vector<std::future<test::HttpResponse>> chats;
    for (int i = 0; i < 400 && (a.wait_for(0s) != std::future_status::ready ||
                                b.wait_for(0s) != std::future_status::ready);
         ++i) {
        const auto e = loch.engine_status("flux");
        max_active = std::max(max_active, e["active_requests"].get<int>());
        const auto st = loch.status();
        for (const auto& w : st["queue"]["waiting"]) saw_queue |= w["model"] == "flux";
        if (saw_queue && i % 10 == 0)
            chats.push_back(std::async(std::launch::async, [&] {
                return loch.post("/v1/chat/completions", chat("chat", false, 2));
            }));
        std::this_thread::sleep_for(25ms);
    }
    EXPECT_EQ(a.get().status, 200);
    EXPECT_EQ(b.get().status, 200);
    EXPECT_FALSE(chats.empty());
    for (auto& c : chats) EXPECT_EQ(c.get().status, 200);
    EXPECT_TRUE(saw_queue);
    EXPECT_EQ(max_active, 1);  // sd-server never had two at once
}

TEST(Images, SigsegvOfSdServerMidGenerationIsA502WithTheExitClassAndItsLastLines) {
    test::TempDir dir{"loch-itest-images"};
    LochServer loch(dir.path(), config(dir, "2GiB", flux_entry("    watchdog: 300s\n", 40)));
    ASSERT_EQ(loch.post("/v1/images/generations", image("128x128")).status, 200) << loch.log();
    auto r =
        std::async(std::launch::async, [&] { return loch.post("/v1/images/generations", image("128x128")); });
    for (int i = 0; i < 200 && loch.engine_status("flux")["active_requests"] != 1; ++i)
        std::this_thread::sleep_for(20ms);
    std::this_thread::sleep_for(500ms);  // inside the generation
    const auto pid = loch.engine_pid("flux");
    ASSERT_TRUE(pid);
    ::kill(*pid, SIGSEGV);
    const auto got = r.get();
    ASSERT_EQ(got.status, 502) << got.body;
    const auto e = json::parse(got.body)["error"];
    EXPECT_EQ(e["type"], "engine_failed");
    EXPECT_EQ(e["exit"]["signal_name"], "SIGSEGV") << e;
    EXPECT_FALSE(e["exit"]["log_tail"].empty());
    EXPECT_TRUE(request_reservations(loch, "flux").empty());
}

TEST(Images, AClientThatHangsUpDoesNotReleaseTheRequestReservationBeforeTheEngineIsDone) {
    test::TempDir dir{"loch-itest-images"};
    LochServer loch(dir.path(), config(dir, "2GiB", flux_entry("", 30)));
    ASSERT_EQ(loch.post("/v1/images/generations", image("128x128")).status, 200);
    {
        // Sends the whole request and hangs up without reading anything.
        namespace http = boost::beast::http;
        boost::asio::io_context ioc;
        boost::asio::ip::tcp::socket sock(ioc);
        sock.connect({boost::asio::ip::make_address("127.0.0.1"), loch.port()});
        http::request<http::string_body> req{http::verb::post, "/v1/images/generations", 11};
        req.set(http::field::host, "127.0.0.1");
        req.set(http::field::content_type, "application/json");
        req.body() = image("128x128");
        req.prepare_payload();
        http::write(sock, req);
        std::this_thread::sleep_for(200ms);
        sock.close();
    }
    // ... the request is on its way; hang up before sd-server is done.
    std::this_thread::sleep_for(300ms);
    ASSERT_EQ(request_reservations(loch, "flux").size(), 1u) << loch.status()["devices"].dump(1);
    EXPECT_EQ(loch.engine_status("flux")["active_requests"], 1);
    // Its progress, from sd-server's step lines, while it runs.
    json progress = json::object();
    for (int i = 0; i < 100 && progress.value("step", 0.0) < 1; ++i) {
        std::this_thread::sleep_for(50ms);
        progress = loch.engine_status("flux").value("progress", json::object());
    }
    EXPECT_EQ(progress.value("steps", 0.0), 30) << progress;
    EXPECT_GT(progress.value("eta_s", 0.0), 0) << progress;
    EXPECT_EQ(request_reservations(loch, "flux").size(), 1u);  // sd-server is still generating it
    for (int i = 0; i < 600 && !request_reservations(loch, "flux").empty(); ++i)
        std::this_thread::sleep_for(50ms);
    EXPECT_TRUE(request_reservations(loch, "flux").empty());
    EXPECT_EQ(loch.engine_status("flux")["active_requests"], 0);
}

// sd.cpp's own "<name> compute buffer size: X MB(RAM)" lines of a run, the largest per planner phase.
std::map<std::string, double> engine_buffers_mib(LochServer& loch, const std::string& model) {
    const auto r = loch.get("/loch/engines/" + model + "/log?lines=500");
    std::map<std::string, double> out;
    const auto answer = json::parse(r.body, nullptr, false);
    if (!answer.is_object() || !answer.contains("lines")) return out;
    for (const auto& l : answer["lines"]) {
        const std::string line = l.is_string() ? l.get<std::string>() : l.value("line", "");
        const auto at = line.find(" compute buffer size: ");
        if (at == std::string::npos) continue;
        const auto name_start = line.rfind(' ', at - 1) + 1;
        const std::string name = line.substr(name_start, at - name_start);
        const std::string phase = name == "clip" || name == "t5"     ? "text encoder"
                                  : name == "taesd" || name == "vae" ? "decoder"
                                                                     : "diffusion step";
        const double mib = std::stod(line.substr(at + 22));
        out[phase] = std::max(out[phase], mib);
    }
    return out;
}

// `loch plan` for the same files and size: its phases in MiB.
std::map<std::string, double> planned_mib(const fs::path& dir, const std::vector<std::string>& args) {
    const fs::path out = dir / "plan.json";
    std::vector<std::string> argv = {"plan"};
    argv.insert(argv.end(), args.begin(), args.end());
    argv.push_back("--json");
    EXPECT_EQ(test::run_to_completion(fs::path(LOCH_BIN_DIR) / "loch", argv, out, 60s), 0);
    std::ifstream in(out);
    const auto j = json::parse(in, nullptr, false);
    std::map<std::string, double> m;
    if (!j.is_object()) return m;
    for (const auto& p : j["phases"]) m[p["phase"]] = p["bytes"].get<double>() / (1024.0 * 1024.0);
    return m;
}

struct Sd15 {
    test::SynthModel checkpoint{{"--diffusion", "sd1.5"}, "sd15.gguf"};
    test::SynthModel taesd{{"--diffusion", "taesd"}, "taesd.gguf"};
};
Sd15& sd15() {
    static Sd15 m;
    return m;
}

// SD1.5 as one checkpoint (UNet + CLIP-L + VAE in one file, as sd.cpp detects it) with the tiny decoder:
// drawn through loch, and sd.cpp's own buffer lines are never above what the planner reserved for them.
TEST(Images, AnSd15CheckpointDrawsThroughLochAndItsBuffersAreNeverAboveThePlan) {
    test::TempDir dir{"loch-itest-images"};
    const auto& m = sd15();
    LochServer loch(dir.path(),
                    config(dir, "6GiB",
                           "  - name: sd15\n    engine: sd-server\n    path: " +
                               m.checkpoint.path().string() + "\n    sd: {taesd: " + m.taesd.path().string() +
                               ", steps: 1, threads: 2, max_size: 512x512}\n"));
    for (const char* size : {"128x128", "256x256"}) {
        const auto [rc, got] = ask(loch, dir.path(), size, "sd15");
        ASSERT_EQ(rc, 0) << got << loch.log();
        EXPECT_EQ(std::to_string(got["width"].get<int>()) + "x" + std::to_string(got["height"].get<int>()),
                  size);
    }
    const auto measured = engine_buffers_mib(loch, "sd15");
    ASSERT_TRUE(measured.contains("diffusion step")) << loch.get("/loch/engines/sd15/log?lines=80").body;
    ASSERT_TRUE(measured.contains("decoder"));
    const auto planned =
        planned_mib(dir.path(), {m.checkpoint.path().string(), "--taesd", m.taesd.path().string(), "--width",
                                 "256", "--height", "256"});
    for (const auto& [phase, mib] : measured) {
        ASSERT_TRUE(planned.contains(phase)) << phase;
        EXPECT_GE(planned.at(phase), mib) << phase;
    }
    // The engine's reservation holds at least what sd-server says it loaded (UNet + CLIP + VAE params).
    const auto e = loch.engine_status("sd15");
    EXPECT_GE(e["reservation"]["bytes"].get<std::uint64_t>(), e["measured"]["bytes"].get<std::uint64_t>());
    EXPECT_GT(e["measured"]["bytes"].get<std::uint64_t>(), 1'500'000'000u);
}

// Flux.2-dev as sd.cpp loads it: the diffusion model (48 single blocks: dev, not Klein), Mistral Small 3.2 as
// the `llm` text encoder and the 32-channel VAE, all from loch-synth in CI size, drawn through loch.
TEST(Images, AFlux2DevSetWithItsMistralTextEncoderDrawsThroughLoch) {
    test::TempDir dir{"loch-itest-images"};
    const test::SynthModel flux2{{"--diffusion", "flux2-tiny"}, "flux2-tiny.gguf"};
    const test::SynthModel te{{"--preset", "tiny-mistral-te"}, "mistral-te.gguf"};
    const test::SynthModel vae{{"--diffusion", "flux2-vae"}, "flux2-vae.gguf"};
    LochServer loch(dir.path(),
                    config(dir, "3GiB",
                           "  - name: flux2\n    engine: sd-server\n    path: " + flux2.path().string() +
                               "\n    sd: {llm: " + te.path().string() + ", vae: " + vae.path().string() +
                               ", steps: 1, threads: 2, max_size: 256x256}\n"));
    const auto r = loch.post("/v1/images/generations",
                             json{{"model", "flux2"}, {"prompt", "a lighthouse"}, {"size", "64x64"}}.dump());
    ASSERT_EQ(r.status, 200) << r.body << loch.log();
    const auto got = json::parse(r.body);
    ASSERT_EQ(got["data"].size(), 1u);
    EXPECT_GT(got["data"][0]["b64_json"].get<std::string>().size(), 100u);
    const auto log = loch.get("/loch/engines/flux2/log?lines=400").body;
    EXPECT_NE(log.find("Version: Flux.2 "), std::string::npos)
        << log;  // "Flux.2 klein" would be the wrong one
    EXPECT_NE(log.find("text_encoders"), std::string::npos) << log;
}

// An edit: OpenAI's client uploads a PNG (multipart), names no size; loch routes it by its form's model
// field, costs it at the image's own size (read from the PNG header) and forwards the body untouched.
TEST(Images, AnEditUploadedByTheOpenAIClientIsRoutedByItsFormAndDrawnAtTheImagesSize) {
    test::TempDir dir{"loch-itest-images"};
    LochServer loch(dir.path(), config(dir, "2GiB", flux_entry()));
    const auto [rc, got] = ask(loch, dir.path(), "192x128", "flux", "edit");
    ASSERT_EQ(rc, 0) << got << loch.log();
    EXPECT_EQ(got["width"], 192);
    EXPECT_EQ(got["height"], 128);
    // A form that is not one is refused by loch with the reason, before anything starts.
    const auto r = loch.post("/v1/images/edits", "{\"model\":\"flux\"}");
    EXPECT_EQ(r.status, 400) << r.body;
    EXPECT_NE(r.body.find("multipart/form-data"), std::string::npos) << r.body;
}

}  // namespace
}  // namespace loch::itest
