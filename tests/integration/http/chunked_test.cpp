// Request bodies sent chunked (Transfer-Encoding: chunked, no Content-Length), as llm-d's endpoint picker
// and Envoy forward them (issue 30): a chat, an Ollama chat and a Batch API upload are answered as if sent
// whole; a chunked body over the route's limit is refused with the limit, and loch keeps answering.
#include <gtest/gtest.h>

#include "batch_fixtures.hpp"

using namespace loch;
using namespace loch::itest;
using namespace std::chrono_literals;
using nlohmann::json;

namespace {

test::HttpResponse post_chunked(LochServer& loch, const std::string& target, const std::string& body,
                                const std::string& content_type = "application/json", std::size_t chunk = 7) {
    test::HttpRequest r;
    r.method = boost::beast::http::verb::post;
    r.port = loch.port();
    r.target = target;
    r.content_type = content_type;
    r.body = body;
    r.chunk_bytes = chunk;
    return test::http_request(std::move(r));
}

}  // namespace

TEST(Chunked, ChunkedBodiesAreReadOnEveryKindOfRouteWithTheSameLimits) {
    test::TempDir dir("loch-itest-chunked");
    LochServer loch(dir.path(), config(dir, "2GiB", model_entry("tiny", models().tiny.path(), kArgs),
                                       "max_body: 4KiB\n"));
    const auto r = post_chunked(loch, "/v1/chat/completions", chat("tiny", false, 4));
    ASSERT_EQ(r.status, 200) << r.body;
    EXPECT_EQ(json::parse(r.body)["object"], "chat.completion");

    const auto ollama = post_chunked(
        loch, "/api/chat",
        R"({"model":"tiny","stream":false,"options":{"num_predict":3},"messages":[{"role":"user","content":"Hi"}]})",
        "application/json", 3);
    ASSERT_EQ(ollama.status, 200) << ollama.body;
    EXPECT_TRUE(json::parse(ollama.body).contains("message")) << ollama.body;

    // The upload route streams its body to disk: chunked in 1 KiB pieces, larger than max_body (its own
    // limit is max_batch_file).
    std::string lines;
    for (int i = 0; i < 40; ++i) lines += chat_item("c" + std::to_string(i), "tiny") + "\n";
    ASSERT_GT(lines.size(), 4096u);
    const auto up =
        post_chunked(loch, "/v1/files", form(lines), "multipart/form-data; boundary=" + kBoundary, 1024);
    ASSERT_EQ(up.status, 200) << up.body;
    EXPECT_EQ(json::parse(up.body)["bytes"], lines.size());

    // Over the limit: refused as it arrives, with the numbers; loch still answers.
    const auto big = post_chunked(loch, "/v1/chat/completions",
                                  chat("tiny", false, 4, json({{"pad", std::string(8000, 'x')}}).dump()),
                                  "application/json", 1000);
    EXPECT_EQ(big.status, 413) << big.body;
    EXPECT_EQ(json::parse(big.body)["error"]["type"], "request_too_large") << big.body;
    EXPECT_EQ(loch.post("/v1/chat/completions", chat("tiny", false, 2)).status, 200);
}
