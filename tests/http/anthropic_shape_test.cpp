// Anthropic's routes in Anthropic's shape (issue 53): message ids `msg_…` in answers and in message_start,
// every other event untouched, errors with Anthropic's types and statuses (529 where loch is too busy),
// loch's own type and numbers kept beside them.
#include "http/anthropic_shape.hpp"

#include <gtest/gtest.h>

#include "http/translation.hpp"

namespace loch::http {
namespace {

using broker::Error;
using broker::ErrorKind;
using nlohmann::json;

TEST(AnthropicShape, MessageIdsAreMsgInTheAnswerAndInMessageStart) {
    AnthropicShape shape;
    const auto a = json::parse(shape.answer(R"({"id":"chatcmpl-abc","type":"message","model":"m"})", 200));
    EXPECT_EQ(a["id"], "msg_abc");
    EXPECT_EQ(a["model"], "m");
    const std::string start =
        "event: message_start\ndata: {\"type\":\"message_start\",\"message\":{\"id\":\"chatcmpl-x1\","
        "\"model\":\"m\"}}\n\n";
    const auto out = shape.event(start);
    ASSERT_TRUE(out.starts_with("event: message_start\ndata: ")) << out;
    EXPECT_EQ((*sse_json(out))["message"]["id"], "msg_x1");
    // Every other event passes byte for byte; an error answer of the engine too.
    const std::string delta =
        "event: content_block_delta\ndata: "
        "{\"type\":\"content_block_delta\",\"delta\":{\"text\":\"hi\"}}\n\n";
    EXPECT_EQ(shape.event(delta), delta);
    EXPECT_EQ(shape.answer(R"({"error":{"message":"x"}})", 500), R"({"error":{"message":"x"}})");
    // A command engine's answer gets the configured name.
    AnthropicShape renamed(std::string("chat"));
    EXPECT_EQ(json::parse(renamed.answer(R"({"id":"msg_1","model":"/models/x.gguf"})", 200))["model"],
              "chat");
}

TEST(AnthropicShape, ErrorsCarryAnthropicsTypeAndStatusAndLochsNumbers) {
    const AnthropicShape shape;
    const Error missing(ErrorKind::model_not_found, "no model 'x'", {{"model", "x"}});
    auto body = shape.error_body(missing);
    EXPECT_EQ(body["type"], "error");
    EXPECT_EQ(body["error"]["type"], "not_found_error");
    EXPECT_EQ(body["error"]["loch_type"], "model_not_found");
    EXPECT_EQ(body["error"]["model"], "x");
    EXPECT_EQ(shape.error_status(missing), 404u);
    // Too busy to take it in time: Anthropic's overloaded_error, 529, which Claude Code retries.
    const Error busy(ErrorKind::queue_timeout, "waited 5m");
    EXPECT_EQ(shape.error_status(busy), 529u);
    EXPECT_EQ(shape.error_body(busy)["error"]["type"], "overloaded_error");
    EXPECT_EQ(shape.error_status(Error(ErrorKind::queue_full, "full")), 429u);
    EXPECT_EQ(shape.error_body(Error(ErrorKind::queue_full, "full"))["error"]["type"], "rate_limit_error");
    EXPECT_EQ(shape.error_body(Error(ErrorKind::context_length_exceeded, "long"))["error"]["type"],
              "invalid_request_error");
    EXPECT_EQ(shape.error_body(Error(ErrorKind::unauthorized, "key"))["error"]["type"],
              "authentication_error");
    EXPECT_EQ(shape.error_body(Error(ErrorKind::engine_failed, "died"))["error"]["type"], "api_error");
    const auto ev = shape.stream_error(busy);
    ASSERT_TRUE(ev.starts_with("event: error\ndata: ")) << ev;
    EXPECT_EQ((*sse_json(ev))["error"]["type"], "overloaded_error");
    // The default translation keeps loch's status.
    const ModelRename plain("m");
    EXPECT_EQ(plain.error_status(busy), 503u);
}

}  // namespace
}  // namespace loch::http
