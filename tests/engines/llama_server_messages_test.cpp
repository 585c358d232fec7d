// What llama-server renders for an Anthropic Messages or Responses request (chat_messages_of: the pinned
// server's own conversion, text only) and the probe that decides whether a saved conversation may match
// (prompt_probe): the first text, in the order the engine renders it.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "engines/kinds/llama_server.hpp"

using namespace loch::engines;
using nlohmann::json;

namespace {

std::string probe(std::string_view route, const json& body) {
    RequestView r;
    r.route = route;
    r.body = &body;
    return LlamaServerKind().prompt_probe(r);
}

}  // namespace

TEST(ChatMessagesOf, AnAnthropicBodyBecomesItsSystemThenItsMessagesAsTextParts) {
    const json body = {
        {"model", "chat"},
        {"max_tokens", 16},
        {"system",
         json::array({{{"type", "text"}, {"text", "You are "}}, {{"type", "text"}, {"text", "terse."}}})},
        {"messages", json::array({{{"role", "user"}, {"content", "Hi"}},
                                  {{"role", "assistant"},
                                   {"content", json::array({{{"type", "text"}, {"text", "Hello"}}})}},
                                  {{"role", "user"}, {"content", "More"}}})}};
    const auto m = chat_messages_of("/v1/messages", body);
    ASSERT_TRUE(m);
    ASSERT_EQ(m->size(), 4u);
    EXPECT_EQ((*m)[0], (json{{"role", "system"}, {"content", "You are terse."}}));
    EXPECT_EQ((*m)[1], (json{{"role", "user"}, {"content", "Hi"}}));
    EXPECT_EQ((*m)[2]["content"], json::array({{{"type", "text"}, {"text", "Hello"}}}));
    // Tool use, images, thinking: not modelled here, so nothing is rendered (and nothing guessed).
    json tool = body;
    tool["messages"][1]["content"] =
        json::array({{{"type", "tool_use"}, {"id", "t"}, {"name", "f"}, {"input", json::object()}}});
    EXPECT_FALSE(chat_messages_of("/v1/messages", tool));
    EXPECT_FALSE(chat_messages_of("/v1/messages", json{{"system", "x"}}));
}

TEST(ChatMessagesOf, AResponsesBodyBecomesItsInstructionsThenItsInputAndMergesAssistantTurns) {
    EXPECT_EQ(
        *chat_messages_of("/v1/responses", json{{"input", "Hi"}, {"instructions", "Be brief."}}),
        json::array({{{"role", "system"}, {"content", "Be brief."}}, {{"role", "user"}, {"content", "Hi"}}}));
    const json items = {
        {"input", json::array({{{"role", "user"}, {"content", "Hi"}},
                               {{"type", "message"},
                                {"role", "assistant"},
                                {"content", json::array({{{"type", "output_text"}, {"text", "Hel"}}})}},
                               {{"type", "message"},
                                {"role", "assistant"},
                                {"content", json::array({{{"type", "output_text"}, {"text", "lo"}}})}},
                               {{"role", "user"},
                                {"content", json::array({{{"type", "input_text"}, {"text", "More"}}})}}})}};
    const auto m = chat_messages_of("/v1/responses", items);
    ASSERT_TRUE(m);
    ASSERT_EQ(m->size(), 3u);
    EXPECT_EQ((*m)[0]["content"], json::array({{{"type", "text"}, {"text", "Hi"}}}));
    EXPECT_EQ((*m)[1]["role"], "assistant");
    EXPECT_EQ((*m)[1]["content"].size(), 2u);  // one assistant message, as the engine merges them
    json call = items;
    call["input"].push_back(
        {{"type", "function_call"}, {"call_id", "c"}, {"name", "f"}, {"arguments", "{}"}});
    EXPECT_FALSE(chat_messages_of("/v1/responses", call));
}

TEST(ChatMessagesOf, AChatBodyIsItsOwnMessagesAndOtherRoutesHaveNone) {
    const json chat = {{"messages", json::array({{{"role", "user"}, {"content", "Hi"}}})}};
    EXPECT_EQ(*chat_messages_of("/v1/chat/completions", chat), chat["messages"]);
    EXPECT_FALSE(chat_messages_of("/v1/completions", json{{"prompt", "Hi"}}));
    EXPECT_FALSE(chat_messages_of("/v1/messages", json::array()));
}

TEST(PromptProbe, IsTheFirstTextInTheOrderTheEngineRendersItForEveryApi) {
    const std::string longer(100, 'x');
    EXPECT_EQ(probe("/v1/chat/completions",
                    {{"messages", json::array({{{"role", "user"}, {"content", "  Hi there "}}})}}),
              "Hi there");
    EXPECT_EQ(probe("/v1/messages",
                    {{"system", "Sys"}, {"messages", json::array({{{"role", "user"}, {"content", "Hi"}}})}}),
              "Sys");
    EXPECT_EQ(probe("/v1/messages",
                    {{"messages",
                      json::array({{{"role", "user"},
                                    {"content", json::array({{{"type", "text"}, {"text", "Hi"}}})}}})}}),
              "Hi");
    EXPECT_EQ(probe("/v1/responses", {{"instructions", "Be brief."}, {"input", "Hi"}}), "Be brief.");
    EXPECT_EQ(
        probe("/v1/responses",
              {{"input",
                json::array({{{"role", "user"},
                              {"content", json::array({{{"type", "input_text"}, {"text", "Hi"}}})}}})}}),
        "Hi");
    EXPECT_EQ(probe("/v1/responses", {{"input", longer}}).size(), 64u);
    EXPECT_EQ(probe("/v1/completions", {{"prompt", "Once"}}), "Once");
    EXPECT_EQ(probe("/v1/embeddings", {{"input", "Hi"}}), "");
}
