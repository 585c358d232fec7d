// What an engine's answer says it used, read for the request log (http/engine_answer.hpp): every API's usage
// shape, so that /v1/messages and /v1/responses are not blind in requests.jsonl (issue 53).
#include "http/engine_answer.hpp"

#include <gtest/gtest.h>

#include "http/translation.hpp"

namespace loch::http {
namespace {

using nlohmann::json;

TEST(EngineAnswer, ChatUsageAndLlamaTimingsAreRead) {
    observe::RequestRecord rec;
    take_usage(json::parse(R"({"usage":{"prompt_tokens":12,"completion_tokens":5,
                                        "prompt_tokens_details":{"cached_tokens":4}}})"),
               rec);
    EXPECT_EQ(rec.prompt_tokens, 12u);
    EXPECT_EQ(rec.completion_tokens, 5u);
    EXPECT_EQ(rec.cached_tokens, 4u);
    observe::RequestRecord timed;
    take_usage(json::parse(R"({"timings":{"prompt_n":7,"predicted_n":3,"cache_n":2}})"), timed);
    EXPECT_EQ(timed.prompt_tokens, 7u);
    EXPECT_EQ(timed.completion_tokens, 3u);
}

TEST(EngineAnswer, AnthropicStreamUsageAddsUpOverItsEvents) {
    observe::RequestRecord rec;
    // message_start has the input, message_delta the output; the stream's events name their type first.
    const auto start = sse_json(
        "event: message_start\ndata: {\"type\":\"message_start\",\"message\":{\"id\":\"msg_1\","
        "\"usage\":{\"input_tokens\":31,\"output_tokens\":1,\"cache_read_input_tokens\":8}}}\n\n");
    const auto delta = sse_json(
        "event: message_delta\ndata: {\"type\":\"message_delta\",\"usage\":{\"output_tokens\":17}}\n\n");
    ASSERT_TRUE(start && delta);
    take_usage(*start, rec);
    take_usage(*delta, rec);
    EXPECT_EQ(rec.prompt_tokens, 31u);
    EXPECT_EQ(rec.completion_tokens, 17u);
    EXPECT_EQ(rec.cached_tokens, 8u);
}

TEST(EngineAnswer, ResponsesUsageIsReadFromItsCompletedEventAndItsBody) {
    observe::RequestRecord rec;
    take_usage(json::parse(R"({"type":"response.completed","response":{"id":"resp_1",
                                 "usage":{"input_tokens":20,"output_tokens":9,
                                          "input_tokens_details":{"cached_tokens":3}}}})"),
               rec);
    EXPECT_EQ(rec.prompt_tokens, 20u);
    EXPECT_EQ(rec.completion_tokens, 9u);
    EXPECT_EQ(rec.cached_tokens, 3u);
    observe::RequestRecord whole;  // a non-streamed answer, scanned without a parse
    take_usage_scan(R"({"id":"resp_1","output":[],"usage":{"input_tokens":20,"output_tokens":9}})", whole);
    EXPECT_EQ(whole.prompt_tokens, 20u);
    EXPECT_EQ(whole.completion_tokens, 9u);
}

}  // namespace
}  // namespace loch::http
