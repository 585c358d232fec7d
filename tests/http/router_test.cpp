// Routing and API-key checks.
#include <gtest/gtest.h>

#include "http/query.hpp"
#include "http/router.hpp"

using namespace loch::http;

TEST(Router, KnownRoutes) {
    EXPECT_EQ(route("GET", "/health").kind, Route::Kind::health);
    EXPECT_EQ(route("GET", "/v1/models").kind, Route::Kind::models);
    auto r = route("POST", "/v1/chat/completions");
    EXPECT_EQ(r.kind, Route::Kind::openai);
    EXPECT_EQ(r.endpoint, Endpoint::chat_completions);
    EXPECT_EQ(route("POST", "/v1/completions").endpoint, Endpoint::completions);
    EXPECT_EQ(route("POST", "/v1/embeddings").endpoint, Endpoint::embeddings);
    // Anthropic's and OpenAI's token counts are model routes of their own (issue 53).
    EXPECT_EQ(route("POST", "/v1/messages/count_tokens").endpoint, Endpoint::anthropic_count_tokens);
    EXPECT_EQ(route("POST", "/v1/responses/input_tokens").endpoint, Endpoint::responses_input_tokens);
    EXPECT_EQ(route("POST", "/v1/messages/count_tokens").kind, Route::Kind::openai);
    EXPECT_EQ(route("GET", "/loch/status").kind, Route::Kind::status);
    EXPECT_EQ(route("POST", "/loch/plan").kind, Route::Kind::plan);
    EXPECT_EQ(route("GET", "/v1/models?x=1").kind, Route::Kind::models);
}

TEST(Router, EngineLogWithLines) {
    auto r = route("GET", "/loch/engines/qwen-0.5b/log?lines=20");
    EXPECT_EQ(r.kind, Route::Kind::engine_log);
    EXPECT_EQ(r.engine, "qwen-0.5b");
    EXPECT_EQ(r.lines, 20u);
    EXPECT_EQ(route("GET", "/loch/engines/x/log").lines, 100u);
    EXPECT_EQ(route("GET", "/loch/engines/x/log?lines=abc").lines, 100u);
    EXPECT_EQ(route("GET", "/loch/engines/x/log?lines=99999999").lines, 10000u);
    EXPECT_EQ(route("GET", "/loch/engines/a/b/log").kind, Route::Kind::not_found);
    EXPECT_EQ(route("GET", "/loch/engines//log").kind, Route::Kind::not_found);
}

TEST(Router, WrongMethodAndUnknownPath) {
    auto r = route("GET", "/v1/chat/completions");
    EXPECT_EQ(r.kind, Route::Kind::method_not_allowed);
    EXPECT_EQ(r.allow, "POST");
    EXPECT_EQ(route("GET", "/v2/models").kind, Route::Kind::not_found);
    EXPECT_EQ(route("GET", "").kind, Route::Kind::not_found);
}

TEST(Auth, BearerKeys) {
    EXPECT_TRUE(authorized("", {}));
    EXPECT_TRUE(authorized("Bearer sk-1", {"sk-0", "sk-1"}));
    EXPECT_FALSE(authorized("Bearer sk-2", {"sk-0", "sk-1"}));
    EXPECT_FALSE(authorized("sk-1", {"sk-1"}));
    EXPECT_FALSE(authorized("Bearer sk-1x", {"sk-1"}));
    EXPECT_FALSE(authorized("Bearer sk-", {"sk-1"}));
    EXPECT_FALSE(authorized("", {"sk-1"}));
}

namespace loch::http {
namespace {

TEST(ModelRoutes, EveryRowOfTheTableIsRoutedWithItsMethodAndNamesWhereTheModelIs) {
    ASSERT_FALSE(model_routes().empty());
    for (const auto& row : model_routes()) {
        const Route r = route(row.method, row.path);
        EXPECT_EQ(r.kind, Route::Kind::openai) << row.path;
        ASSERT_EQ(r.model_route, &row) << row.path;
        EXPECT_EQ(r.endpoint, row.endpoint) << row.path;
        EXPECT_EQ(to_string(row.endpoint), row.path);
        EXPECT_FALSE(row.model_field.empty()) << row.path;
        const Route wrong = route(row.method == "GET" ? "POST" : "GET", row.path);
        EXPECT_EQ(wrong.kind, Route::Kind::method_not_allowed) << row.path;
        EXPECT_EQ(wrong.allow, row.method);
    }
    EXPECT_EQ(find_model_route("/v1/images/nope"), nullptr);
    EXPECT_EQ(route("POST", "/v1/chat/completions?x=1").kind, Route::Kind::openai);
}

}  // namespace
}  // namespace loch::http

TEST(Router, RoutesTheDashboardMetricsOllamaAndModelControl) {
    EXPECT_EQ(route("GET", "/").kind, Route::Kind::dashboard);
    EXPECT_EQ(route("GET", "/metrics").kind, Route::Kind::metrics);
    EXPECT_EQ(route("POST", "/api/chat").kind, Route::Kind::ollama_generation);
    EXPECT_EQ(route("POST", "/api/chat").path, "/api/chat");
    EXPECT_EQ(route("POST", "/api/embed").kind, Route::Kind::ollama_generation);
    EXPECT_EQ(route("POST", "/api/show").kind, Route::Kind::ollama_show);
    EXPECT_EQ(route("GET", "/api/chat").kind, Route::Kind::method_not_allowed);
    const auto load = route("POST", "/loch/models/qwen-7b/load");
    EXPECT_EQ(load.kind, Route::Kind::model_load);
    EXPECT_EQ(load.engine, "qwen-7b");
    EXPECT_EQ(route("POST", "/loch/models/qwen-7b/unload").kind, Route::Kind::model_unload);
    EXPECT_EQ(route("POST", "/loch/models//load").kind, Route::Kind::not_found);
    EXPECT_TRUE(route("GET", "/loch/engines/x/log?lines=5&follow=1").follow);
    EXPECT_FALSE(route("GET", "/loch/engines/x/log?lines=5").follow);
}

TEST(Router, HoldsByMethodAndId) {
    EXPECT_EQ(route("POST", "/loch/holds").kind, Route::Kind::hold_create);
    EXPECT_EQ(route("GET", "/loch/holds").kind, Route::Kind::holds_list);
    EXPECT_EQ(route("PUT", "/loch/holds").kind, Route::Kind::method_not_allowed);
    const auto get = route("GET", "/loch/holds/hold-3");
    EXPECT_EQ(get.kind, Route::Kind::hold_get);
    EXPECT_EQ(get.engine, "hold-3");
    EXPECT_EQ(route("POST", "/loch/holds/hold-3").kind, Route::Kind::hold_update);
    EXPECT_EQ(route("DELETE", "/loch/holds/hold-3").kind, Route::Kind::hold_release);
    EXPECT_EQ(route("PATCH", "/loch/holds/hold-3").kind, Route::Kind::method_not_allowed);
    EXPECT_EQ(route("GET", "/loch/holds/a/b").kind, Route::Kind::not_found);
    EXPECT_EQ(route("GET", "/loch/holds/").kind, Route::Kind::not_found);
}

TEST(Router, RequestsAreListedAndCancelledById) {
    EXPECT_EQ(route("GET", "/loch/requests").kind, Route::Kind::requests_list);
    EXPECT_EQ(route("POST", "/loch/requests").kind, Route::Kind::method_not_allowed);
    const auto cancel = route("DELETE", "/loch/requests/5f090c-12");
    EXPECT_EQ(cancel.kind, Route::Kind::request_cancel);
    EXPECT_EQ(cancel.engine, "5f090c-12");
    EXPECT_EQ(route("GET", "/loch/requests/5f090c-12").kind, Route::Kind::method_not_allowed);
    EXPECT_EQ(route("DELETE", "/loch/requests/a/b").kind, Route::Kind::not_found);
    EXPECT_EQ(route("DELETE", "/loch/requests/").kind, Route::Kind::not_found);
}

TEST(Router, TheBatchApisFilesByMethodAndId) {
    EXPECT_EQ(route("POST", "/v1/files").kind, Route::Kind::files);
    EXPECT_EQ(route("GET", "/v1/files").kind, Route::Kind::files);
    EXPECT_EQ(route("GET", "/v1/files").engine, "");
    const auto bad = route("PUT", "/v1/files");
    EXPECT_EQ(bad.kind, Route::Kind::method_not_allowed);
    EXPECT_EQ(bad.allow, "GET, POST");
    const auto one = route("GET", "/v1/files/file-12ab");
    EXPECT_EQ(one.kind, Route::Kind::files);
    EXPECT_EQ(one.engine, "file-12ab");
    EXPECT_EQ(route("DELETE", "/v1/files/file-12ab").kind, Route::Kind::files);
    EXPECT_EQ(route("POST", "/v1/files/file-12ab").kind, Route::Kind::method_not_allowed);
    const auto content = route("GET", "/v1/files/file-12ab/content");
    EXPECT_EQ(content.kind, Route::Kind::files);
    EXPECT_EQ(content.engine, "file-12ab");
    EXPECT_EQ(content.path, "/v1/files/file-12ab/content");
    EXPECT_EQ(route("DELETE", "/v1/files/file-12ab/content").kind, Route::Kind::method_not_allowed);
    EXPECT_EQ(route("GET", "/v1/files/file-12ab/other").kind, Route::Kind::not_found);
    EXPECT_EQ(route("GET", "/v1/files//content").kind, Route::Kind::not_found);
}

TEST(Router, StoredResponsesByMethodAndIdBesideTheModelRoutes) {
    auto r = route("GET", "/v1/responses/resp_1");
    EXPECT_EQ(r.kind, Route::Kind::stored_response);
    EXPECT_EQ(r.engine, "resp_1");
    EXPECT_EQ(r.path, "");
    EXPECT_EQ(route("DELETE", "/v1/responses/resp_1").kind, Route::Kind::stored_response);
    r = route("GET", "/v1/responses/resp_1/input_items?order=asc");
    EXPECT_EQ(r.kind, Route::Kind::stored_response);
    EXPECT_EQ(r.path, "input_items");
    EXPECT_EQ(route("POST", "/v1/responses/resp_1").allow, "GET, DELETE");
    EXPECT_EQ(route("DELETE", "/v1/responses/resp_1/input_items").allow, "GET");
    EXPECT_EQ(route("GET", "/v1/responses/resp_1/other").kind, Route::Kind::not_found);
    // The model routes under the same prefix stay model routes.
    EXPECT_EQ(route("POST", "/v1/responses").kind, Route::Kind::openai);
    EXPECT_EQ(route("POST", "/v1/responses/input_tokens").kind, Route::Kind::openai);
}

TEST(QueryParam, ValuesArePercentDecodedAndAbsentKeysOrUnparsableTargetsGiveNothing) {
    EXPECT_EQ(query_param("/v1/batches?after=batch_1&limit=20", "limit"), "20");
    EXPECT_EQ(query_param("/v1/batches?limit=20&after=batch%5F1%20x", "after"), "batch_1 x");
    EXPECT_EQ(query_param("/v1/batches?after=", "after"), "");
    EXPECT_FALSE(query_param("/v1/batches?afterwards=1", "after"));
    EXPECT_FALSE(query_param("/v1/batches", "after"));
    EXPECT_FALSE(query_param("/v1/batches?after=%zz", "after"));  // not valid percent-encoding
    EXPECT_TRUE(route("GET", "/loch/engines/x/log?follow=true&lines=7").follow);
    EXPECT_EQ(route("GET", "/loch/engines/x/log?follow=true&lines=7").lines, 7u);
}
