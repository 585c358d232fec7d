// Issue 27: the everyday clients beyond OpenAI's chat route, through loch to the real llama-server: OpenAI's
// Responses API (Codex, the Agents SDK) and Anthropic's Messages API (Claude Code) with their official Python
// clients, streamed and not; an error in Anthropic's shape; reranking passed through with the engine's fix.
#include <fstream>
#include <map>
#include <thread>

#include <gtest/gtest.h>

#include "fixtures.hpp"

namespace loch::itest {
namespace {

std::pair<int, json> family(LochServer& loch, const fs::path& dir, const std::string& mode) {
    const fs::path log = dir / ("api-" + mode + ".log");
    const int rc =
        test::run_to_completion(python(),
                                {(fs::path(LOCH_SOURCE_DIR) / "tests/peers/api_families.py").string(),
                                 std::to_string(loch.port()), "tiny", mode},
                                log, 300s);
    std::ifstream in(log);
    std::string out((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    const auto end = out.find_last_not_of('\n');
    const auto start = end == std::string::npos ? std::string::npos : out.rfind('\n', end);
    return {rc, json::parse(out.substr(start == std::string::npos ? 0 : start + 1,
                                       end == std::string::npos ? 0 : end + 1),
                            nullptr, false)};
}

TEST(Clients, ResponsesAndMessagesWithTheirOfficialClientsAndRerankPassedThrough) {
    test::TempDir dir{"loch-itest-clients"};
    LochServer loch(dir.path(), config(dir, "1GiB", model_entry("tiny", models().tiny.path(), kArgs)));
    for (const char* mode : {"responses", "responses-stream", "messages", "messages-stream"}) {
        const auto [rc, got] = family(loch, dir.path(), mode);
        EXPECT_EQ(rc, 0) << mode << ": " << got << "\n" << loch.log();
        EXPECT_TRUE(got.contains("text")) << mode << ": " << got;
        if (std::string(mode) == "responses-stream") EXPECT_EQ(got["completed"], true) << got;
        if (std::string(mode).starts_with("messages")) {
            EXPECT_FALSE(got["stop_reason"].is_null()) << got;
            EXPECT_TRUE(got.value("id", "").starts_with("msg_")) << mode << ": " << got;  // as the cloud's
        }
    }
    {
        // Token counting (Claude Code asks before it sends): the engine's tokenizer, through loch.
        const auto [rc, got] = family(loch, dir.path(), "count-tokens");
        EXPECT_EQ(rc, 0) << got << "\n" << loch.log();
        EXPECT_GT(got.value("input_tokens", 0), 0) << got;
    }
    {
        // An error the Anthropic client can read: its status, Anthropic's type, loch's type and message, in
        // Anthropic's shape.
        const auto [rc, got] = family(loch, dir.path(), "messages-error");
        ASSERT_EQ(rc, 3) << got;
        EXPECT_EQ(got["status"], 404) << got;
        EXPECT_EQ(got["type"], "not_found_error") << got;  // Anthropic's type; loch's beside it
        EXPECT_EQ(got["loch_type"], "model_not_found") << got;
        EXPECT_EQ(got["top_type"], "error") << got;
        EXPECT_NE(got["message"].get<std::string>().find("no-such-model"), std::string::npos) << got;
    }
    // Reranking goes to the engine like every model route; this model was not started for it, and the answer
    // says what to put in loch.yaml.
    const auto r = loch.post("/v1/rerank", R"({"model":"tiny","query":"a","documents":["b","c"]})");
    EXPECT_EQ(r.status, 400) << r.body;
    EXPECT_NE(r.body.find("--reranking"), std::string::npos) << r.body;
    // Each went through admission and the request log like the other routes (flushed within 100 ms).
    std::this_thread::sleep_for(300ms);
    std::ifstream log(dir.path() / "state" / "logs" / "requests.jsonl");
    std::map<std::string, int> routes;
    for (std::string line; std::getline(log, line);) ++routes[json::parse(line).value("route", "")];
    EXPECT_GE(routes["/v1/responses"], 2) << loch.log();
    EXPECT_GE(routes["/v1/messages"], 3);
    EXPECT_GE(routes["/v1/rerank"], 1);
}

// Issue 53: the Responses API as OpenAI defines it, owned by loch — the SDK's accumulating stream helper,
// stored responses read back, listed and deleted, and a second turn that names the first only by its id (the
// engine refuses previous_response_id: loch replays the stored conversation).
TEST(Clients, TheResponsesApiIsStreamedStoredAndContinuedWithTheOfficialClient) {
    test::TempDir dir{"loch-itest-responses"};
    LochServer loch(dir.path(), config(dir, "1GiB", model_entry("tiny", models().tiny.path(), kArgs)));
    {
        const auto [rc, got] = family(loch, dir.path(), "responses-helper");
        ASSERT_EQ(rc, 0) << got << "\n" << loch.log();
        EXPECT_EQ(got["deltas"], got["text"]) << got;
        EXPECT_TRUE(got.value("id", "").starts_with("resp_")) << got;
        EXPECT_EQ(got["model"], "tiny") << got;
    }
    const auto [rc, got] = family(loch, dir.path(), "responses-turns");
    ASSERT_EQ(rc, 0) << got << "\n" << loch.log();
    EXPECT_EQ(got["retrieved"], got["first"]) << got;
    EXPECT_EQ(got["previous"], got["first"]) << got;
    EXPECT_EQ(got["input_items"], json::array({"message"})) << got;  // the second turn's own input
    EXPECT_EQ(got["input_roles"], json::array({"user"})) << got;
    EXPECT_EQ(got["after_delete"], "not found") << got;
    EXPECT_EQ(got["chained"], "not found") << got;
    // The engine saw the first turn again: more input tokens than the second prompt alone.
    EXPECT_GT(got["usage_second"].get<int>(), got["usage_first"].get<int>()) << got;
    {
        // A client that hangs up right after response.completed (Codex) got its whole answer: the response
        // is kept, and the request log says 200, not 499.
        const auto [hrc, hung] = family(loch, dir.path(), "responses-hangup");
        ASSERT_EQ(hrc, 0) << hung << "\n" << loch.log();
        EXPECT_EQ(hung["status"], "completed") << hung;
        std::this_thread::sleep_for(300ms);
        std::ifstream log(dir.path() / "state" / "logs" / "requests.jsonl");
        int answered = 0, gone = 0;
        for (std::string line; std::getline(log, line);) {
            const auto j = json::parse(line);
            if (j.value("route", "") != "/v1/responses") continue;
            answered += j.value("status", 0) == 200;
            gone += j.value("status", 0) == 499;
        }
        EXPECT_EQ(gone, 0);
        EXPECT_GE(answered, 4);  // the stream helper, two turns, the hung-up one (a third turn was refused)
    }
    // loch still answers after all of it.
    EXPECT_EQ(loch.get("/health").status, 200);
}

}  // namespace
}  // namespace loch::itest
