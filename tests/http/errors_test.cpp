// Error rendering: one status per kind, the JSON shape, Retry-After, the SSE form.
#include <gtest/gtest.h>

#include "http/errors.hpp"

using namespace loch;
using broker::Error;
using broker::ErrorKind;
namespace bhttp = boost::beast::http;

TEST(Errors, StatusPerKind) {
    EXPECT_EQ(http::status_of(ErrorKind::model_not_found), bhttp::status::not_found);
    EXPECT_EQ(http::status_of(ErrorKind::invalid_request), bhttp::status::bad_request);
    EXPECT_EQ(http::status_of(ErrorKind::context_length_exceeded), bhttp::status::bad_request);
    EXPECT_EQ(http::status_of(ErrorKind::request_too_large), bhttp::status::payload_too_large);
    EXPECT_EQ(http::status_of(ErrorKind::insufficient_memory), bhttp::status::service_unavailable);
    EXPECT_EQ(http::status_of(ErrorKind::queue_full), bhttp::status::too_many_requests);
    EXPECT_EQ(http::status_of(ErrorKind::queue_timeout), bhttp::status::service_unavailable);
    EXPECT_EQ(http::status_of(ErrorKind::engine_failed), bhttp::status::bad_gateway);
    EXPECT_EQ(http::status_of(ErrorKind::watchdog_timeout), bhttp::status::gateway_timeout);
    EXPECT_EQ(http::status_of(ErrorKind::unauthorized), bhttp::status::unauthorized);
    EXPECT_EQ(http::status_of(ErrorKind::insufficient_storage), bhttp::status::insufficient_storage);
    EXPECT_EQ(broker::to_string(ErrorKind::insufficient_storage), "insufficient_storage");
    EXPECT_EQ(broker::error_kind_named("insufficient_storage"), ErrorKind::insufficient_storage);
}

TEST(Errors, BodyCarriesTypeMessageAndNumbers) {
    Error e(ErrorKind::insufficient_memory, "does not fit",
            {{"need_bytes", 17179869184ull}, {"capacity_bytes", 1024}, {"type", "ignored"}});
    auto j = http::error_body(e);
    ASSERT_TRUE(j.contains("error"));
    EXPECT_EQ(j["error"]["type"], "insufficient_memory");
    EXPECT_EQ(j["error"]["message"], "does not fit");
    EXPECT_EQ(j["error"]["need_bytes"], 17179869184ull);
    EXPECT_EQ(j["error"]["capacity_bytes"], 1024);
    // Anthropic's shape as well ({"type":"error","error":{type,message}}): its SDK and Claude Code read it.
    EXPECT_EQ(j["type"], "error");
}

TEST(Errors, RetryAfterIsInTheBody) {
    Error e(ErrorKind::queue_full, "full", {}, 7);
    EXPECT_EQ(http::error_body(e)["error"]["retry_after_s"], 7);
}

TEST(Errors, SseEventIsOneCompleteEventWithValidJson) {
    Error e(ErrorKind::engine_failed, "engine died: exit 139 / SIGSEGV \xff", {{"model", "m"}});
    const auto ev = http::sse_error_event(e);
    ASSERT_TRUE(ev.starts_with("event: error\ndata: "));
    ASSERT_TRUE(ev.ends_with("\n\n"));
    EXPECT_EQ(ev.find("\n\n"), ev.size() - 2);  // exactly one event
    const auto data = ev.substr(std::string("event: error\ndata: ").size());
    auto j = nlohmann::json::parse(data.substr(0, data.size() - 2));  // invalid UTF-8 was replaced
    EXPECT_EQ(j["error"]["type"], "engine_failed");
}
