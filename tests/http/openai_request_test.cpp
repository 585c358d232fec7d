// Reading what loch needs from OpenAI request bodies; bad bodies are 400s that name the field.
#include <gtest/gtest.h>

#include "broker/error.hpp"
#include "http/openai_request.hpp"

using namespace loch::http;
using loch::broker::Error;
using loch::broker::ErrorKind;

namespace {
std::string error_of(Endpoint e, std::string_view body) {
    try {
        parse_openai_request(e, body);
    } catch (const Error& err) {
        EXPECT_EQ(err.kind(), ErrorKind::invalid_request);
        return err.what();
    }
    return "";
}
}  // namespace

TEST(OpenAIRequest, Chat) {
    auto r = parse_openai_request(Endpoint::chat_completions,
                                  R"({"model":"m","stream":true,"max_tokens":16,
                                      "messages":[{"role":"user","content":"hello"},
                                                  {"role":"user","content":[{"type":"text","text":"abc"}]}]})");
    EXPECT_EQ(r.model, "m");
    EXPECT_TRUE(r.stream);
    EXPECT_EQ(r.max_tokens, 16u);
    EXPECT_EQ(r.prompt_bytes, 8u);
}

TEST(OpenAIRequest, CompletionWithTokenIdsAndNPredict) {
    auto r = parse_openai_request(Endpoint::completions, R"({"model":"m","prompt":[1,2,3],"n_predict":-1})");
    EXPECT_EQ(r.prompt_token_ids, 3u);
    EXPECT_FALSE(r.max_tokens);
    r = parse_openai_request(Endpoint::completions,
                             R"({"model":"m","prompt":"abcd","max_completion_tokens":5})");
    EXPECT_EQ(r.prompt_bytes, 4u);
    EXPECT_EQ(r.max_tokens, 5u);
}

TEST(OpenAIRequest, EmbeddingsNeverStream) {
    auto r = parse_openai_request(Endpoint::embeddings, R"({"model":"m","input":["a","bc"],"stream":true})");
    EXPECT_FALSE(r.stream);
    EXPECT_EQ(r.prompt_bytes, 3u);
}

TEST(OpenAIRequest, BadBodiesNameTheProblem) {
    EXPECT_NE(error_of(Endpoint::chat_completions, "{not json").find("not valid JSON"), std::string::npos);
    EXPECT_NE(error_of(Endpoint::chat_completions, "[1]").find("JSON object"), std::string::npos);
    EXPECT_NE(error_of(Endpoint::chat_completions, R"({"messages":[]})").find("'model'"), std::string::npos);
    EXPECT_NE(error_of(Endpoint::chat_completions, R"({"model":7})").find("'model'"), std::string::npos);
    EXPECT_NE(error_of(Endpoint::chat_completions, R"({"model":"m"})").find("'messages'"), std::string::npos);
    EXPECT_NE(
        error_of(Endpoint::chat_completions, R"({"model":"m","messages":[{"content":"x"}]})").find("role"),
        std::string::npos);
    EXPECT_NE(error_of(Endpoint::chat_completions,
                       R"({"model":"m","stream":"yes","messages":[{"role":"user","content":"x"}]})")
                  .find("'stream'"),
              std::string::npos);
    EXPECT_NE(
        error_of(Endpoint::completions, R"({"model":"m","prompt":"x","max_tokens":-3})").find("max_tokens"),
        std::string::npos);
    EXPECT_NE(error_of(Endpoint::completions, R"({"model":"m","prompt":{"a":1}})").find("'prompt'"),
              std::string::npos);
    EXPECT_NE(error_of(Endpoint::completions, R"({"model":"m","prompt":[[[[1]]]]})").find("nested"),
              std::string::npos);
    // A part's type that is not a string is the client's 400 on every chat API (the fuzzer's find: it threw).
    for (const auto e : {Endpoint::chat_completions, Endpoint::anthropic_messages})
        EXPECT_NE(
            error_of(
                e,
                R"({"model":"m","max_tokens":4,"messages":[{"role":"user","content":[{"type":{"url":"x"}}]}]})")
                .find("'type' must be a string"),
            std::string::npos);
}

// The prompt shapes llama-server accepts pass; every other shape is loch's 400, not the engine's.
TEST(OpenAIRequest, PromptShapesAreCheckedBeforeTheEngineSeesThem) {
    for (const char* ok :
         {R"("hi")", R"(["a","b"])", R"([1,2])", R"(["a",3,"b"])", R"([[1,2],[3]])", R"([["a",1]])"}) {
        SCOPED_TRACE(ok);
        EXPECT_NO_THROW(
            parse_openai_request(Endpoint::completions, std::string(R"({"model":"m","prompt":)") + ok + "}"));
    }
    for (const char* bad :
         {"5", "[]", "[[]]", "[-3]", "[1.5]", "[true]", "null", R"({"a":1})", "[[[1]]]", R"([{"x":1}])"}) {
        SCOPED_TRACE(bad);
        EXPECT_NE(error_of(Endpoint::completions, std::string(R"({"model":"m","prompt":)") + bad + "}")
                      .find("'prompt'"),
                  std::string::npos);
    }
    EXPECT_NE(error_of(Endpoint::embeddings, R"({"model":"m","input":5.5})").find("'input'"),
              std::string::npos);
}

// Issue 27: the Responses API, Anthropic's Messages API and reranking, as their official clients send them.
TEST(OpenAIRequest, ResponsesMessagesAndRerank) {
    auto r = parse_openai_request(Endpoint::responses,
                                  R"({"model":"m","input":"hello","instructions":"be brief","stream":true,
                                      "max_output_tokens":32})");
    EXPECT_EQ(r.model, "m");
    EXPECT_TRUE(r.stream);
    EXPECT_EQ(r.max_tokens, 32u);
    EXPECT_EQ(r.prompt_bytes, 13u);
    r = parse_openai_request(
        Endpoint::responses,
        R"({"model":"m","input":[{"role":"user","content":[{"type":"input_text","text":"abc"}]},
                                                      {"type":"function_call_output","call_id":"c","output":"x"}]})");
    EXPECT_EQ(r.prompt_bytes, 3u);
    EXPECT_NE(error_of(Endpoint::responses, R"({"model":"m"})").find("'input'"), std::string::npos);

    r = parse_openai_request(Endpoint::anthropic_messages,
                             R"({"model":"m","max_tokens":64,"system":[{"type":"text","text":"sys"}],
                                 "messages":[{"role":"user","content":"hi"}]})");
    EXPECT_EQ(r.max_tokens, 64u);
    EXPECT_EQ(r.prompt_bytes, 5u);
    EXPECT_NE(error_of(Endpoint::anthropic_messages, R"({"model":"m","messages":[]})").find("'messages'"),
              std::string::npos);

    // Token counts (Anthropic's count_tokens, OpenAI's input_tokens): read like their route, nothing
    // generated.
    r = parse_openai_request(
        Endpoint::anthropic_count_tokens,
        R"({"model":"m","max_tokens":64,"stream":true,"messages":[{"role":"user","content":"hi"}]})");
    EXPECT_FALSE(r.stream);
    EXPECT_FALSE(r.max_tokens);
    EXPECT_EQ(r.prompt_bytes, 2u);
    r = parse_openai_request(Endpoint::responses_input_tokens, R"({"model":"m","input":"hello"})");
    EXPECT_EQ(r.prompt_bytes, 5u);

    r = parse_openai_request(Endpoint::rerank, R"({"model":"m","query":"q","documents":["a","bcd"]})");
    EXPECT_FALSE(r.stream);
    EXPECT_EQ(r.prompt_bytes, 4u);  // the longest query + document pair
    EXPECT_NE(error_of(Endpoint::rerank, R"({"model":"m","query":"q"})").find("'documents'"),
              std::string::npos);
}

// Issue 27: A1111 clients name the checkpoint in override_settings or not at all; "auto" is a size.
TEST(OpenAIRequest, A1111WithoutAModelAndSizeAuto) {
    auto r = parse_openai_request(
        Endpoint::sdapi_txt2img,
        R"({"prompt":"a cat","override_settings":{"sd_model_checkpoint":"flux [abc]"}})");
    EXPECT_EQ(r.model, "flux [abc]");
    r = parse_openai_request(Endpoint::sdapi_txt2img, R"({"prompt":"a cat","width":512,"height":512})");
    EXPECT_EQ(r.model, "");  // the server picks the only image model
    EXPECT_NE(error_of(Endpoint::image_generations, R"({"prompt":"a cat"})").find("'model'"),
              std::string::npos);
    r = parse_openai_request(Endpoint::image_generations, R"({"model":"m","prompt":"a cat","size":"auto"})");
    EXPECT_EQ(r.model, "m");
}

TEST(OpenAIRequest, MalformedJsonSaysWhereItBreaks) {
    try {
        parse_openai_request(Endpoint::chat_completions, "{\"model\":\"m\",\n \"messages\": [}");
        FAIL() << "accepted";
    } catch (const Error& e) {
        EXPECT_EQ(e.kind(), ErrorKind::invalid_request);
        EXPECT_NE(std::string(e.what()).find("line 2, column 15"), std::string::npos) << e.what();
        EXPECT_EQ(e.details().at("line"), 2);
        EXPECT_EQ(e.details().at("column"), 15);
        EXPECT_EQ(e.details().at("byte"), 29);
    }
    // Cut short: the position is the end, and it says so.
    EXPECT_NE(error_of(Endpoint::chat_completions, R"({"model":"m")").find("ends early"), std::string::npos);
    // A number no double holds is the client's mistake too (a fuzzer found it escaping as a crash).
    EXPECT_NE(
        error_of(Endpoint::chat_completions, R"({"model":"m","temperature":1e999})").find("beyond a double"),
        std::string::npos);
}

TEST(OpenAIRequest, ZeroMaxTokensIsRefusedAsTheCloudsDo) {
    for (const char* key : {"max_tokens", "max_completion_tokens", "max_output_tokens"}) {
        const auto body =
            std::string(R"({"model":"m","messages":[{"role":"user","content":"x"}],")") + key + "\":0}";
        EXPECT_NE(error_of(Endpoint::chat_completions, body).find("at least 1"), std::string::npos) << key;
    }
    // llama.cpp's own n_predict 0 (evaluate the prompt, generate nothing) stays the engine's.
    EXPECT_EQ(
        parse_openai_request(Endpoint::completions, R"({"model":"m","prompt":"a","n_predict":0})").max_tokens,
        0u);
}
