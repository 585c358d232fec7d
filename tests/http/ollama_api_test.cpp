// Ollama's generation API over OpenAI's: the request mapping, the answers in Ollama's shape (whole and
// NDJSON), keep_alive, and the errors for bad input.
#include <gtest/gtest.h>

#include "http/ollama_api.hpp"

using namespace loch::http;
using nlohmann::json;

TEST(OllamaApi, KeepAliveTakesGoDurationsSecondsAndNegativeForever) {
    EXPECT_EQ(parse_keep_alive("5m"), KeepAlive(std::optional<std::chrono::seconds>(300)));
    EXPECT_EQ(parse_keep_alive("1h30m"), KeepAlive(std::optional<std::chrono::seconds>(5400)));
    EXPECT_EQ(parse_keep_alive(45), KeepAlive(std::optional<std::chrono::seconds>(45)));
    EXPECT_EQ(parse_keep_alive("0"), KeepAlive(std::optional<std::chrono::seconds>(0)));
    EXPECT_EQ(parse_keep_alive(-1), KeepAlive(std::optional<std::chrono::seconds>()));
    EXPECT_EQ(parse_keep_alive("-1m"), KeepAlive(std::optional<std::chrono::seconds>()));
    EXPECT_FALSE(parse_keep_alive(nullptr).has_value());
    EXPECT_THROW(parse_keep_alive("5 parsecs"), loch::broker::Error);
    EXPECT_THROW(parse_keep_alive(json::array()), loch::broker::Error);
}

// Found by fuzz_ollama_request under UBSan: a duration past what a count of seconds holds was cast anyway.
TEST(OllamaApi, AKeepAliveLongerThanACenturyIsForeverNotAnOverflow) {
    const KeepAlive forever(std::optional<std::chrono::seconds>{});
    EXPECT_EQ(parse_keep_alive("1333333333333333333333330"), forever);
    EXPECT_EQ(parse_keep_alive("1e30h"), forever);
    EXPECT_EQ(parse_keep_alive("inf"), forever);
    EXPECT_EQ(parse_keep_alive(1e300), forever);
    EXPECT_EQ(parse_keep_alive("876000h"), forever);  // 100 years
    EXPECT_EQ(parse_keep_alive("8760h"), KeepAlive(std::optional<std::chrono::seconds>(31536000)));
    EXPECT_THROW(parse_keep_alive("nan"), loch::broker::Error);
}

TEST(OllamaApi, ChatMapsMessagesOptionsFormatAndStreamsByDefault) {
    const auto call = translate_ollama("/api/chat", R"({"model":"m","messages":[{"role":"user","content":"hi",
        "images":["QUJD"]}],"options":{"num_predict":7,"temperature":0.5,"num_ctx":8192,"top_k":3},"format":"json"})");
    EXPECT_EQ(call.endpoint, Endpoint::chat_completions);
    EXPECT_TRUE(call.stream);
    EXPECT_EQ(call.num_ctx, 8192u);
    const auto body = json::parse(call.body);
    EXPECT_EQ(body["max_tokens"], 7);
    EXPECT_EQ(body["temperature"], 0.5);
    EXPECT_EQ(body["top_k"], 3);
    EXPECT_FALSE(body.contains("num_ctx"));
    EXPECT_EQ(body["response_format"]["type"], "json_object");
    EXPECT_EQ(body["stream_options"]["include_usage"], true);
    EXPECT_EQ(body["messages"][0]["content"][1]["image_url"]["url"], "data:image/png;base64,QUJD");
}

TEST(OllamaApi, AStreamBecomesNdjsonLinesEndingWithTheCounts) {
    auto call = translate_ollama("/api/chat", R"({"model":"m","messages":[{"role":"user","content":"hi"}]})");
    auto& t = *call.translation;
    EXPECT_EQ(t.stream_content_type(), "application/x-ndjson");
    const auto line = t.event("data: {\"choices\":[{\"delta\":{\"content\":\"He\"}}]}\n\n");
    ASSERT_FALSE(line.empty());
    EXPECT_EQ(line.back(), '\n');
    const auto j = json::parse(line);
    EXPECT_EQ(j["message"]["content"], "He");
    EXPECT_EQ(j["done"], false);
    EXPECT_EQ(j["model"], "m");
    EXPECT_TRUE(t.event("data: {\"choices\":[{\"delta\":{},\"finish_reason\":\"length\"}],"
                        "\"usage\":{\"prompt_tokens\":5,\"completion_tokens\":9}}\n\n")
                    .empty());
    EXPECT_TRUE(t.event("data: [DONE]\n\n").empty());
    const auto last = json::parse(t.end());
    EXPECT_EQ(last["done"], true);
    EXPECT_EQ(last["done_reason"], "length");
    EXPECT_EQ(last["eval_count"], 9);
    EXPECT_EQ(last["prompt_eval_count"], 5);
}

TEST(OllamaApi, GenerateAnswersWithResponseAndRawGoesToCompletions) {
    auto call = translate_ollama("/api/generate",
                                 R"({"model":"m","prompt":"Once","system":"be brief","stream":false})");
    EXPECT_EQ(json::parse(call.body)["messages"][0]["role"], "system");
    const auto a = json::parse(call.translation->answer(
        R"({"choices":[{"message":{"role":"assistant","content":"upon"},"finish_reason":"stop"}]})", 200));
    EXPECT_EQ(a["response"], "upon");
    EXPECT_EQ(a["done"], true);
    EXPECT_EQ(translate_ollama("/api/generate", R"({"model":"m","prompt":"x","raw":true})").endpoint,
              Endpoint::completions);
}

TEST(OllamaApi, AnEmptyPromptLoadsAndWithKeepAliveZeroUnloads) {
    EXPECT_EQ(translate_ollama("/api/generate", R"({"model":"m"})").only, OllamaCall::Only::load);
    EXPECT_EQ(translate_ollama("/api/generate", R"({"model":"m","keep_alive":0})").only,
              OllamaCall::Only::unload);
    EXPECT_EQ(translate_ollama("/api/chat", R"({"model":"m","messages":[]})").only, OllamaCall::Only::load);
    EXPECT_EQ(ollama_load_answer("/api/generate", "m", true)["done_reason"], "unload");
}

TEST(OllamaApi, EmbedAnswersWithOneVectorPerInput) {
    auto call = translate_ollama("/api/embed", R"({"model":"e","input":["a","b"]})");
    EXPECT_EQ(call.endpoint, Endpoint::embeddings);
    EXPECT_FALSE(call.stream);
    const auto a = json::parse(call.translation->answer(
        R"({"data":[{"embedding":[1,2]},{"embedding":[3,4]}],"usage":{"prompt_tokens":2}})", 200));
    EXPECT_EQ(a["embeddings"], json::parse("[[1,2],[3,4]]"));
    EXPECT_EQ(a["prompt_eval_count"], 2);
    auto legacy = translate_ollama("/api/embeddings", R"({"model":"e","prompt":"a"})");
    EXPECT_EQ(json::parse(legacy.translation->answer(R"({"data":[{"embedding":[5]}]})", 200))["embedding"],
              json::parse("[5]"));
}

TEST(OllamaApi, BadInputIsAClearErrorNamingTheField) {
    const auto message = [](const std::string& path, const std::string& body) {
        try {
            translate_ollama(path, body);
        } catch (const loch::broker::Error& e) {
            return std::string(e.what());
        }
        return std::string("accepted");
    };
    EXPECT_NE(message("/api/chat", "{").find("not valid JSON: it ends early"), std::string::npos);
    EXPECT_NE(message("/api/chat", "[1]").find("JSON object"), std::string::npos);
    EXPECT_NE(message("/api/chat", R"({"messages":[]})").find("'model'"), std::string::npos);
    EXPECT_NE(message("/api/chat", R"({"model":"m","stream":"yes"})").find("'stream'"), std::string::npos);
    EXPECT_NE(message("/api/chat", R"({"model":"m","messages":[{"content":"x"}]})").find("role"),
              std::string::npos);
    EXPECT_NE(message("/api/chat", R"({"model":"m","options":{"num_predict":"many"}})").find("num_predict"),
              std::string::npos);
    EXPECT_NE(message("/api/embed", R"({"model":"m"})").find("'input'"), std::string::npos);
    EXPECT_NE(message("/api/generate", R"({"model":"m","format":3})").find("'format'"), std::string::npos);
}

// Found by the fuzzer: a field of the wrong type is a clear refusal, and an engine answer with odd figures is
// translated without them — never an exception of the JSON library's.
TEST(OllamaApi, WrongTypesAreRefusedOrIgnoredNeverThrownThrough) {
    try {
        (void)translate_ollama("/api/generate", R"({"model":"m","prompt":"x","raw":"x"})");
        ADD_FAILURE() << "a non-boolean raw was accepted";
    } catch (const loch::broker::Error& e) {
        EXPECT_NE(std::string(e.what()).find("'raw'"), std::string::npos) << e.what();
    }
    EXPECT_EQ(translate_ollama("/api/generate", R"({"model":"m","prompt":null})").only,
              OllamaCall::Only::load);
    auto chat = translate_ollama(
        "/api/chat", R"({"model":"m","stream":false,"messages":[{"role":"user","content":"hi"}]})");
    const auto out = json::parse(chat.translation->answer(
        R"({"choices":[{"message":{"content":"x"},"finish_reason":"stop"}],"usage":{"prompt_tokens":"many"},)"
        R"("timings":{"prompt_ms":"slow"}})",
        200));
    EXPECT_EQ(out["message"]["content"], "x");
    auto embed = translate_ollama("/api/embed", R"({"model":"m","input":"x"})");
    const auto e = json::parse(
        embed.translation->answer(R"({"data":[1,{"embedding":[0.5]}],"usage":{"prompt_tokens":"x"}})", 200));
    EXPECT_EQ(e["embeddings"].size(), 1u);
    const auto err = json::parse(embed.translation->answer(R"({"error":{"message":7}})", 500));
    EXPECT_TRUE(err["error"].is_string());
}
