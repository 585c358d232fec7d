// SSE framing: whole events out, however the bytes were split.
#include <gtest/gtest.h>

#include "http/sse.hpp"

using loch::http::is_done_event;
using loch::http::SseFramer;

TEST(Sse, SplitsEventsAtBlankLines) {
    SseFramer f;
    auto ev = f.feed("data: {\"a\":1}\n\ndata: {\"b\":2}\n\ndata: [DO");
    ASSERT_EQ(ev.size(), 2u);
    EXPECT_EQ(ev[0], "data: {\"a\":1}\n\n");
    EXPECT_EQ(ev[1], "data: {\"b\":2}\n\n");
    EXPECT_TRUE(f.mid_event());
    ev = f.feed("NE]\n\n");
    ASSERT_EQ(ev.size(), 1u);
    EXPECT_TRUE(is_done_event(ev[0]));
    EXPECT_FALSE(f.mid_event());
}

TEST(Sse, ByteByByteGivesTheSameEvents) {
    const std::string stream = "event: x\ndata: 1\n\ndata: 2\r\n\r\n: ping\n\ndata: [DONE]\n\n";
    SseFramer whole, bytes;
    auto expected = whole.feed(stream);
    std::vector<std::string> got;
    for (char c : stream)
        for (auto& e : bytes.feed(std::string_view(&c, 1))) got.push_back(e);
    EXPECT_EQ(got, expected);
    ASSERT_EQ(expected.size(), 4u);
    EXPECT_EQ(expected[1], "data: 2\r\n\r\n");
    std::string joined;
    for (auto& e : got) joined += e;
    EXPECT_EQ(joined, stream);  // nothing lost, nothing added
}

TEST(Sse, OversizedEventIsForwardedNotHeldForever) {
    SseFramer f(16);
    auto ev = f.feed("data: 0123456789abcdef");
    ASSERT_EQ(ev.size(), 1u);
    EXPECT_FALSE(f.mid_event());
    EXPECT_EQ(f.take_rest(), "");
}

TEST(Sse, RestAtEndOfStream) {
    SseFramer f;
    EXPECT_TRUE(f.feed("data: partial").empty());
    EXPECT_EQ(f.take_rest(), "data: partial");
}

TEST(Sse, TheRelaysViewsAreTheEventsAndOneRunOfTheirBytes) {
    SseFramer f;
    const auto& ev = f.feed_views("data: 1\n\ndata: 2\r\n\r\ndata: 3");
    ASSERT_EQ(ev.size(), 2u);
    EXPECT_EQ(ev[0], "data: 1\n\n");
    EXPECT_EQ(ev[1], "data: 2\r\n\r\n");
    EXPECT_EQ(f.complete(), "data: 1\n\ndata: 2\r\n\r\n");
    EXPECT_TRUE(f.mid_event());
    const auto& more = f.feed_views("\n\n: ping\n");
    ASSERT_EQ(more.size(), 1u);
    EXPECT_EQ(more[0], "data: 3\n\n");  // the earlier bytes were not lost when the buffer was reused
    EXPECT_EQ(f.complete(), "data: 3\n\n");
    EXPECT_TRUE(f.feed_views("").empty());
    EXPECT_EQ(f.complete(), "");
    EXPECT_EQ(f.take_rest(), ": ping\n");
}

TEST(Sse, ATerminatorSplitAcrossReadsIsFoundOnce) {
    // "\r\n" | "\r\n": the second read completes the blank line that the first began.
    SseFramer f;
    EXPECT_TRUE(f.feed("data: x\r\n").empty());
    const auto ev = f.feed("\r\ndata: y\n");
    ASSERT_EQ(ev.size(), 1u);
    EXPECT_EQ(ev[0], "data: x\r\n\r\n");
    const auto end = f.feed("\n");
    ASSERT_EQ(end.size(), 1u);
    EXPECT_EQ(end[0], "data: y\n\n");
    EXPECT_FALSE(f.mid_event());
}

// The events after which a client has its whole answer (a client may hang up right after them).
TEST(Sse, TheFinalEventOfEachFamilyIsKnownAndNoOtherIs) {
    using loch::http::is_final_event;
    EXPECT_TRUE(is_final_event("data: [DONE]\n\n"));
    EXPECT_TRUE(is_final_event("event: response.completed\ndata: {\"type\":\"response.completed\"}\n\n"));
    EXPECT_TRUE(is_final_event("data: {\"type\":\"response.incomplete\",\"response\":{}}\n\n"));
    EXPECT_TRUE(is_final_event("event: message_stop\ndata: {\"type\":\"message_stop\"}\n\n"));
    EXPECT_FALSE(
        is_final_event("event: response.output_text.delta\ndata: {\"delta\":\"response.completed\"}\n\n"));
    EXPECT_FALSE(is_final_event("data: {\"choices\":[{\"delta\":{\"content\":\"message_stop\"}}]}\n\n"));
    EXPECT_FALSE(is_final_event("event: message_delta\ndata: {\"type\":\"message_delta\"}\n\n"));
}
