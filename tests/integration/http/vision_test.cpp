// Vision chat through loch (issue 29): a llama-server model with a projector (args.mmproj, from loch-synth)
// answers chat requests whose messages carry images as data URLs — OpenAI's shape — with the projector in
// its reservation and each image's tokens counted against the slot; what cannot work is refused before
// anything starts. Then the captioning batch the issue asks for, scaled down: images through the Batch API,
// loch killed mid-batch and restarted, a person's request answered while it runs, every item exactly once.
#include <signal.h>

#include <set>

#include <gtest/gtest.h>

#include "batch_fixtures.hpp"
#include "support/data_url.hpp"

using namespace loch;
using namespace loch::itest;
using namespace std::chrono_literals;
using nlohmann::json;

namespace {

std::string data_url(const std::string& png_name) {
    return test::png_data_url(fs::path(LOCH_TEST_DATA_DIR) / png_name);
}

// A chat body asking for a caption of `images` (each a data URL).
json caption(const std::string& model, const std::vector<std::string>& images, int max_tokens = 8) {
    json content = json::array({{{"type", "text"}, {"text", "Write a one-line caption for this photo."}}});
    for (const auto& url : images) content.push_back({{"type", "image_url"}, {"image_url", {{"url", url}}}});
    return {{"model", model},
            {"max_tokens", max_tokens},
            {"messages", json::array({{{"role", "user"}, {"content", content}}})}};
}

std::string vision_models(
    const std::string& args = "    args:\n      ctx: 1024\n      parallel: 2\n      threads: 1\n") {
    return model_entry("vl", models().tiny.path(),
                       args + "      mmproj: " + models().mmproj.path().string() + "\n") +
           model_entry("text", models().tiny2.path(), kArgs);
}

// Whether the model's engine is anything but stopped (/loch/status lists models under "engines").
bool running(LochServer& loch, const std::string& model) {
    const auto status = loch.status();  // (kept: a range over a temporary's member would dangle)
    for (const auto& m : status.at("engines"))
        if (m.value("name", "") == model) return m.value("state", "") != "stopped";
    ADD_FAILURE() << "no model '" << model << "' in /loch/status";
    return false;
}

}  // namespace

TEST(Vision, AChatWithImagesIsAnsweredAndWhatCannotWorkIsRefusedBeforeAnythingStarts) {
    test::TempDir dir("loch-itest-vision");
    LochServer loch(dir.path(), config(dir, "2GiB", vision_models()));
    const std::string small = data_url("photo-320x240.png"), large = data_url("photo-1024x768.png");

    // A model without a projector: refused before its engine starts, with the fix.
    const auto no_projector = loch.post("/v1/chat/completions", caption("text", {small}).dump());
    EXPECT_EQ(no_projector.status, 400) << no_projector.body;
    EXPECT_NE(no_projector.body.find("takes no images"), std::string::npos) << no_projector.body;
    EXPECT_NE(no_projector.body.find("mmproj"), std::string::npos) << no_projector.body;
    // The same on Anthropic's and the Responses API's routes (the engine's 500 before issue 53).
    const std::string b64 = small.substr(small.find(',') + 1);
    const nlohmann::json anthropic = {
        {"model", "text"},
        {"max_tokens", 8},
        {"messages",
         {{{"role", "user"},
           {"content",
            {{{"type", "image"},
              {"source", {{"type", "base64"}, {"media_type", "image/png"}, {"data", b64}}}},
             {{"type", "text"}, {"text", "Describe"}}}}}}}};
    const nlohmann::json responses = {{"model", "text"},
                                      {"max_output_tokens", 8},
                                      {"input",
                                       {{{"role", "user"},
                                         {"content",
                                          {{{"type", "input_image"}, {"image_url", small}},
                                           {{"type", "input_text"}, {"text", "Describe"}}}}}}}};
    for (const auto& [route, body] :
         {std::pair{"/v1/messages", anthropic}, std::pair{"/v1/responses", responses}}) {
        const auto r = loch.post(route, body.dump());
        EXPECT_EQ(r.status, 400) << route << ": " << r.body;
        EXPECT_NE(r.body.find("takes no images"), std::string::npos) << route << ": " << r.body;
    }
    // An image to fetch, and bytes that are not an image: 400s naming where.
    auto remote = caption("vl", {"https://example.com/cat.png"});
    const auto r1 = loch.post("/v1/chat/completions", remote.dump());
    EXPECT_EQ(r1.status, 400) << r1.body;
    EXPECT_NE(r1.body.find("messages[0].content[1].image_url"), std::string::npos) << r1.body;
    const auto r2 =
        loch.post("/v1/chat/completions", caption("vl", {"data:image/png;base64,aGVsbG8="}).dump());
    EXPECT_EQ(r2.status, 400) << r2.body;
    EXPECT_NE(r2.body.find("not a PNG or a JPEG"), std::string::npos) << r2.body;
    EXPECT_FALSE(running(loch, "vl")) << "an engine started for a request refused from its input";
    EXPECT_FALSE(running(loch, "text"));

    // The plan names the projector in the vision model's reservation.
    const auto plan = loch.post("/loch/plan", R"({"model": "vl"})");
    EXPECT_EQ(plan.status, 200) << plan.body;
    EXPECT_NE(plan.body.find("projector"), std::string::npos) << plan.body;

    // Answered: one image, two of different sizes; the engine counts the image tokens in the prompt.
    const auto one = loch.post("/v1/chat/completions", caption("vl", {small}).dump());
    ASSERT_EQ(one.status, 200) << one.body << loch.log();
    const auto j1 = json::parse(one.body);
    const auto two = loch.post("/v1/chat/completions", caption("vl", {small, large}).dump());
    ASSERT_EQ(two.status, 200) << two.body;
    const auto j2 = json::parse(two.body);
    EXPECT_EQ(j2["usage"]["prompt_tokens"].get<int>() - j1["usage"]["prompt_tokens"].get<int>(), 16)
        << "an image is the projector's 16 tokens\n"
        << one.body << "\n"
        << two.body;
    // More images than the slot holds (512 tokens a slot, 16 each): refused with the count, not sent.
    std::vector<std::string> many(40, small);
    const auto over = loch.post("/v1/chat/completions", caption("vl", many).dump());
    EXPECT_EQ(over.status, 400) << over.body;
    EXPECT_NE(over.body.find("40 image(s) × 16 tokens"), std::string::npos) << over.body;
    // loch still answers, and the engine's measured footprint holds the projector's own lines.
    EXPECT_EQ(loch.get("/health").status, 200);
    EXPECT_EQ(loch.post("/v1/chat/completions", caption("vl", {large}).dump()).status, 200);
    EXPECT_TRUE(running(loch, "vl"));
}

TEST(Vision, ACaptioningBatchOfImagesSurvivesAKillAnswersAPersonAndRunsEachItemOnce) {
    test::TempDir dir("loch-itest-vision");
    const auto cfg = config(dir, "2GiB", vision_models());
    std::optional<LochServer> loch;
    loch.emplace(dir.path(), cfg);
    const std::string small = data_url("photo-320x240.png"), large = data_url("photo-1024x768.png");
    constexpr int kItems = 240;
    std::string text;
    for (int i = 0; i < kItems; ++i)
        text += batch_line("photo-" + std::to_string(i), "/v1/chat/completions",
                           caption("vl", {i % 3 ? small : large}, 12)) +
                "\n";
    const std::string id = create_batch(*loch, text);
    const auto mid = poll(*loch, id, [](const json& b) { return b["request_counts"]["completed"] >= 40; });
    ASSERT_LT(mid["request_counts"]["completed"].get<int>(), kItems) << "the batch ended before the kill";
    // A person's captioning request while the batch runs: answered, ahead of the batch's queue.
    const auto t0 = std::chrono::steady_clock::now();
    const auto person = loch->post("/v1/chat/completions", caption("vl", {large}).dump());
    const double person_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    EXPECT_EQ(person.status, 200) << person.body;
    EXPECT_LT(person_s, 10.0) << "the person waited behind the batch";

    ::kill(loch->process().pid(), SIGKILL);
    loch->expect_exit();
    const auto port = loch->port();
    loch.reset();
    loch.emplace(dir.path(), cfg, std::vector<std::string>{}, port);
    const auto done = poll(*loch, id, ended);
    EXPECT_EQ(done["status"], "completed") << done;
    EXPECT_EQ(done["request_counts"], json({{"total", kItems}, {"completed", kItems}, {"failed", 0}}));
    const auto out = file_lines(*loch, done["output_file_id"]);
    std::multiset<std::string> ids;
    for (const auto& o : out) {
        ids.insert(o["custom_id"].get<std::string>());
        const auto& body = o["response"]["body"];
        EXPECT_GE(body["usage"]["prompt_tokens"].get<int>(), 16) << "no image tokens in " << o.dump();
    }
    for (int i = 0; i < kItems; ++i)
        EXPECT_EQ(ids.count("photo-" + std::to_string(i)), 1u)
            << "photo-" << i << " is not in the output once";
    EXPECT_EQ(out.size(), static_cast<std::size_t>(kItems));
    EXPECT_EQ(loch->get("/health").status, 200);
}
