// The Responses API's shape (issue 53): what the openai SDK's responses.stream() and retrieve() read, made
// from what llama-server sends; the conversation a previous_response_id stands for.
#include "responses/shape.hpp"

#include <gtest/gtest.h>

namespace loch::responses {
namespace {

using nlohmann::json;

// llama-server's own stream for one short text answer (tools/server/server-task.cpp), event by event.
std::vector<json> engine_stream() {
    return {
        {{"type", "response.created"},
         {"response", {{"id", "resp_1"}, {"object", "response"}, {"status", "in_progress"}}}},
        {{"type", "response.in_progress"}, {"response", {{"id", "resp_1"}, {"status", "in_progress"}}}},
        {{"type", "response.output_item.added"},
         {"item", {{"id", "msg_a"}, {"type", "message"}, {"role", "assistant"}, {"content", json::array()}}}},
        {{"type", "response.content_part.added"},
         {"item_id", "msg_a"},
         {"part", {{"type", "output_text"}, {"text", ""}}}},
        {{"type", "response.output_text.delta"}, {"item_id", "msg_a"}, {"delta", "Hel"}},
        {{"type", "response.output_text.delta"}, {"item_id", "msg_a"}, {"delta", "lo"}},
        {{"type", "response.output_text.done"}, {"item_id", "msg_a"}, {"text", "Hello"}},
        {{"type", "response.output_item.added"},
         {"item",
          {{"id", "fc_x"},
           {"type", "function_call"},
           {"name", "f"},
           {"arguments", ""},
           {"call_id", "call_x"}}}},
        {{"type", "response.function_call_arguments.delta"}, {"item_id", "fc_x"}, {"delta", "{}"}},
        {{"type", "response.completed"},
         {"response",
          {{"id", "resp_1"},
           {"object", "response"},
           {"created_at", 5},
           {"status", "completed"},
           {"model", "/models/tiny.gguf"},
           {"output",
            {{{"id", "msg_a"},
              {"type", "message"},
              {"role", "assistant"},
              {"status", "completed"},
              {"content", {{{"type", "output_text"}, {"text", "Hello"}, {"annotations", json::array()}}}}},
             {{"id", "fc_x"},
              {"type", "function_call"},
              {"name", "f"},
              {"arguments", "{}"},
              {"call_id", "call_x"}}}},
           {"usage", {{"input_tokens", 3}, {"output_tokens", 2}, {"total_tokens", 5}}}}}},
    };
}

TEST(ResponsesShape, EveryStreamEventCarriesWhatTheSdkIndexesBy) {
    const json echoed =
        echoed_fields({{"instructions", "Be brief."}, {"max_output_tokens", 8}}, "tiny", "resp_0");
    EventShaper shaper(echoed, 1000);
    std::vector<json> out;
    for (auto& e : engine_stream()) out.push_back(shaper.shape(e));
    for (std::size_t i = 0; i < out.size(); ++i) EXPECT_EQ(out[i]["sequence_number"], i) << out[i];
    // response.created: a whole Response (model, created_at, output) — the SDK builds its snapshot from it.
    const json& created = out[0]["response"];
    EXPECT_EQ(created["id"], "resp_1");
    EXPECT_EQ(created["model"], "tiny");
    EXPECT_EQ(created["created_at"], 1000);
    EXPECT_TRUE(created["output"].is_array());
    EXPECT_EQ(created["instructions"], "Be brief.");
    EXPECT_EQ(created["previous_response_id"], "resp_0");
    // Items are numbered in the order they were added; content events name their part.
    EXPECT_EQ(out[2]["output_index"], 0);
    EXPECT_EQ(out[3]["output_index"], 0);
    EXPECT_EQ(out[3]["content_index"], 0);
    EXPECT_EQ(out[4]["output_index"], 0);
    EXPECT_EQ(out[4]["content_index"], 0);
    EXPECT_TRUE(out[4]["logprobs"].is_array());
    EXPECT_EQ(out[6]["content_index"], 0);
    EXPECT_EQ(out[7]["output_index"], 1);
    EXPECT_EQ(out[8]["output_index"], 1);
    EXPECT_FALSE(out[8].contains("content_index"));  // arguments are not a content part
    // response.completed: the engine's output and usage, every echoed field, the configured name.
    ASSERT_TRUE(shaper.completed());
    const json& done = *shaper.completed();
    EXPECT_EQ(done["model"], "tiny");
    EXPECT_EQ(done["status"], "completed");
    EXPECT_EQ(done["output"].size(), 2u);
    EXPECT_EQ(done["usage"]["output_tokens"], 2);
    EXPECT_EQ(done["usage"]["output_tokens_details"]["reasoning_tokens"], 0);
    EXPECT_EQ(done["max_output_tokens"], 8);
    EXPECT_EQ(done["store"], true);
    EXPECT_EQ(done["tools"], json::array());
    EXPECT_EQ(out.back()["response"], done);
}

TEST(ResponsesShape, InputIsAListOfTypedItemsAndATurnContinuesFromItsOutput) {
    EXPECT_EQ(
        input_items("Hi"),
        json::parse(R"([{"type":"message","role":"user","content":[{"type":"input_text","text":"Hi"}]}])"));
    const json given = json::parse(
        R"([{"role":"user","content":"a"},{"role":"assistant","content":"b"},
            {"type":"function_call_output","call_id":"c","output":"ok"}])");
    const json items = input_items(given);
    ASSERT_EQ(items.size(), 3u);
    EXPECT_EQ(items[0]["type"], "message");
    EXPECT_EQ(items[0]["content"][0]["type"], "input_text");
    EXPECT_EQ(items[1]["content"][0]["type"], "output_text");
    EXPECT_EQ(items[2], given[2]);
    EXPECT_EQ(input_items(json(5)), json::array());  // not an input: the engine's check says so
    // The next turn: the context, then the output as input (no ids or statuses; annotations dropped).
    const json context = input_items("Hi");
    const json next = next_context(context, engine_stream().back()["response"]);
    ASSERT_EQ(next.size(), 3u);
    EXPECT_EQ(next[0], context[0]);
    EXPECT_EQ(next[1], json::parse(R"({"type":"message","role":"assistant",
                                       "content":[{"type":"output_text","text":"Hello"}]})"));
    EXPECT_EQ(next[2],
              json::parse(R"({"type":"function_call","call_id":"call_x","name":"f","arguments":"{}"})"));
    // Reasoning without its text is left out (the engine refuses an empty one).
    const json with_reasoning = {
        {"output", {{{"type", "reasoning"}, {"summary", json::array()}, {"content", json::array()}}}}};
    EXPECT_EQ(next_context(json::array(), with_reasoning).size(), 0u);
}

TEST(ResponsesShape, AWholeAnswerGetsTheEchoedFieldsAndKeepsTheEnginesOutput) {
    const json r = complete_response({{"id", "resp_9"},
                                      {"model", "path.gguf"},
                                      {"output", json::array()},
                                      {"status", "completed"},
                                      {"created_at", 7}},
                                     echoed_fields({{"store", false}, {"temperature", 0}}, "tiny", ""), 100);
    EXPECT_EQ(r["id"], "resp_9");
    EXPECT_EQ(r["object"], "response");
    EXPECT_EQ(r["model"], "tiny");
    EXPECT_EQ(r["created_at"], 7);
    EXPECT_EQ(r["completed_at"], 100);
    EXPECT_EQ(r["store"], false);
    EXPECT_EQ(r["temperature"], 0);
    EXPECT_TRUE(r["previous_response_id"].is_null());
    EXPECT_TRUE(r["error"].is_null());
}

}  // namespace
}  // namespace loch::responses
