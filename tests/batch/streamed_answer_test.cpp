// batch/streamed_answer: the chunks llama-server streams (shapes from tools/server/server-task.cpp) become
// the object its non-streamed answer would have been; an error chunk ends the answer as that error.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "batch/streamed_answer.hpp"

namespace loch::batch {
namespace {

using nlohmann::json;

json chat_chunk(json delta, json finish = nullptr, std::size_t index = 0) {
    return {{"id", "chatcmpl-1"},
            {"created", 1700000000},
            {"model", "m"},
            {"system_fingerprint", "b1"},
            {"object", "chat.completion.chunk"},
            {"choices", json::array({{{"index", index}, {"finish_reason", finish}, {"delta", delta}}})}};
}

TEST(StreamedAnswer, OnlyChatAndTextCompletionsAreStreamedAndTheUsageIsAskedFor) {
    EXPECT_TRUE(streams_item("/v1/chat/completions"));
    EXPECT_TRUE(streams_item("/v1/completions"));
    EXPECT_FALSE(streams_item("/v1/embeddings"));
    EXPECT_FALSE(streams_item("/v1/images/generations"));
    EXPECT_FALSE(streams_item("/v1/audio/transcriptions"));
    json body = {{"model", "m"}, {"stream", false}, {"stream_options", {{"include_usage", false}}}};
    ask_streamed(body);
    EXPECT_EQ(body["stream"], true);
    EXPECT_EQ(body["stream_options"]["include_usage"], true);
}

TEST(StreamedAnswer, AChatStreamBecomesTheWholeMessageWithItsUsage) {
    StreamedAnswer a("/v1/chat/completions");
    a.add(chat_chunk({{"role", "assistant"}, {"content", nullptr}}));
    a.add(chat_chunk({{"reasoning_content", "Let me "}}));
    a.add(chat_chunk({{"reasoning_content", "look."}}));
    EXPECT_FALSE(a.finished());
    a.add(chat_chunk({{"content", "A red "}}));
    a.add(chat_chunk({{"content", "barn."}}));
    a.add(chat_chunk(json::object(), "stop"));
    json last = chat_chunk(json::object());
    last["choices"] = json::array();
    last["usage"] = {{"prompt_tokens", 80}, {"completion_tokens", 5}, {"total_tokens", 85}};
    last["timings"] = {{"predicted_n", 5}};
    a.add(last);
    ASSERT_TRUE(a.finished());
    EXPECT_FALSE(a.error());
    const json r = a.answer();
    EXPECT_EQ(r["object"], "chat.completion");
    EXPECT_EQ(r["id"], "chatcmpl-1");
    EXPECT_EQ(r["model"], "m");
    EXPECT_EQ(r["usage"]["prompt_tokens"], 80);
    EXPECT_EQ(r["timings"]["predicted_n"], 5);
    ASSERT_EQ(r["choices"].size(), 1u);
    const json& c = r["choices"][0];
    EXPECT_EQ(c["index"], 0);
    EXPECT_EQ(c["finish_reason"], "stop");
    EXPECT_EQ(c["message"]["role"], "assistant");
    EXPECT_EQ(c["message"]["content"], "A red barn.");
    EXPECT_EQ(c["message"]["reasoning_content"], "Let me look.");
    EXPECT_FALSE(c["message"].contains("tool_calls"));
    EXPECT_FALSE(c.contains("logprobs"));
}

TEST(StreamedAnswer, ToolCallsAreJoinedByTheirIndexAndLogprobsAppended) {
    StreamedAnswer a("/v1/chat/completions");
    a.add(chat_chunk({{"tool_calls", json::array({{{"index", 0},
                                                   {"id", "call_a"},
                                                   {"type", "function"},
                                                   {"function", {{"name", "get_weather"}}}}})}}));
    a.add(chat_chunk(
        {{"tool_calls", json::array({{{"index", 0}, {"function", {{"arguments", "{\"city\":"}}}}})}}));
    a.add(chat_chunk(
        {{"tool_calls", json::array({{{"index", 1},
                                      {"id", "call_b"},
                                      {"type", "function"},
                                      {"function", {{"name", "get_time"}, {"arguments", "{}"}}}}})}}));
    a.add(chat_chunk(
        {{"tool_calls", json::array({{{"index", 0}, {"function", {{"arguments", "\"Oslo\"}"}}}}})}}));
    json lp = chat_chunk(json::object(), "tool_calls");
    lp["choices"][0]["logprobs"] = {{"content", json::array({{{"token", "x"}, {"logprob", -0.5}}})}};
    a.add(lp);
    const json m = a.answer()["choices"][0]["message"];
    ASSERT_EQ(m["tool_calls"].size(), 2u);
    EXPECT_EQ(m["tool_calls"][0]["id"], "call_a");
    EXPECT_EQ(m["tool_calls"][0]["type"], "function");
    EXPECT_EQ(m["tool_calls"][0]["function"]["name"], "get_weather");
    EXPECT_EQ(m["tool_calls"][0]["function"]["arguments"], "{\"city\":\"Oslo\"}");
    EXPECT_EQ(m["tool_calls"][1]["function"]["name"], "get_time");
    EXPECT_EQ(m["content"], "");
    EXPECT_EQ(a.answer()["choices"][0]["finish_reason"], "tool_calls");
    EXPECT_EQ(a.answer()["choices"][0]["logprobs"]["content"][0]["token"], "x");
}

TEST(StreamedAnswer, ATextCompletionJoinsItsTextAndEveryChoiceMustFinish) {
    StreamedAnswer a("/v1/completions");
    const auto chunk = [](std::string text, std::size_t index, json finish) {
        return json{
            {"id", "cmpl-1"},
            {"object", "text_completion"},
            {"choices",
             json::array(
                 {{{"text", text}, {"index", index}, {"logprobs", nullptr}, {"finish_reason", finish}}})}};
    };
    a.add(chunk("Once", 0, nullptr));
    a.add(chunk("Twice", 1, nullptr));
    a.add(chunk(" upon", 0, "length"));
    EXPECT_FALSE(a.finished());  // choice 1 has not ended
    json last = chunk("", 1, "stop");
    last["usage"] = {{"completion_tokens", 3}};
    a.add(last);
    ASSERT_TRUE(a.finished());
    const json r = a.answer();
    EXPECT_EQ(r["object"], "text_completion");
    EXPECT_EQ(r["choices"][0]["text"], "Once upon");
    EXPECT_EQ(r["choices"][0]["finish_reason"], "length");
    EXPECT_TRUE(r["choices"][0]["logprobs"].is_null());
    EXPECT_EQ(r["choices"][1]["text"], "Twice");
    EXPECT_EQ(r["usage"]["completion_tokens"], 3);
}

TEST(StreamedAnswer, AnErrorChunkEndsTheAnswerAsThatError) {
    StreamedAnswer a("/v1/chat/completions");
    a.add(chat_chunk({{"content", "half"}}));
    a.add({{"error", {{"type", "cancelled"}, {"message", "batch item preempted"}}}});
    a.add(chat_chunk(json::object(), "stop"));  // nothing after an error counts
    ASSERT_TRUE(a.error());
    EXPECT_EQ((*a.error())["error"]["type"], "cancelled");
    EXPECT_FALSE(a.finished());
}

TEST(StreamedAnswer, ChunksOfTheWrongShapeAreIgnoredNotFatal) {
    StreamedAnswer a("/v1/chat/completions");
    for (const json& j : {json(nullptr), json(3), json::array(), json{{"choices", 1}},
                          json{{"choices", json::array({1, json{{"delta", 2}}, json{{"index", -1}}})}},
                          json{{"choices", json::array({{{"delta", {{"tool_calls", json::array({1})}}}}})}}})
        a.add(j);
    EXPECT_FALSE(a.error());
    EXPECT_NO_THROW((void)a.answer());
}

}  // namespace
}  // namespace loch::batch
