// Shared by the Batch API suites: input lines, files and uploads as loch's clients send them.
#pragma once

#include <fstream>
#include <string>

#include <gtest/gtest.h>
#include <boost/beast/http/verb.hpp>

#include "fixtures.hpp"

namespace loch::itest {

// One input line: {"custom_id", "method": "POST", "url", "body"}.
inline std::string batch_line(const std::string& id, const std::string& url, const json& body) {
    return json{{"custom_id", id}, {"method", "POST"}, {"url", url}, {"body", body}}.dump();
}

// A captioning-like chat item (a prompt padded by `pad`).
inline std::string chat_item(const std::string& id, const std::string& model, const std::string& pad = "",
                             int max_tokens = 4) {
    return batch_line(id, "/v1/chat/completions",
                      {{"model", model},
                       {"max_tokens", max_tokens},
                       {"messages", json::array({{{"role", "user"}, {"content", "Caption this." + pad}}})}});
}

inline fs::path write_file(const test::TempDir& dir, const std::string& name, const std::string& text) {
    const auto p = dir.path() / name;
    std::ofstream(p, std::ios::binary) << text;
    return p;
}

inline const std::string kBoundary = "----loch-test-boundary";

// The multipart body of an upload of `text` as loch's clients send it.
inline std::string form(const std::string& text, const std::string& purpose = "batch") {
    const std::string& b = kBoundary;
    return "--" + b + "\r\nContent-Disposition: form-data; name=\"purpose\"\r\n\r\n" + purpose + "\r\n--" +
           b +
           "\r\nContent-Disposition: form-data; name=\"file\"; filename=\"in.jsonl\"\r\n"
           "Content-Type: application/jsonl\r\n\r\n" +
           text + "\r\n--" + b + "--\r\n";
}

inline test::HttpResponse upload(LochServer& loch, const std::string& text,
                                 const std::string& purpose = "batch") {
    test::HttpRequest r;
    r.method = boost::beast::http::verb::post;
    r.port = loch.port();
    r.target = "/v1/files";
    r.content_type = "multipart/form-data; boundary=" + kBoundary;
    r.body = form(text, purpose);
    r.timeout = std::chrono::seconds(300);
    return test::http_request(std::move(r));
}

// An upload's file id (the test fails when it is refused).
inline std::string upload_id(LochServer& loch, const std::string& text) {
    const auto r = upload(loch, text);
    EXPECT_EQ(r.status, 200) << r.body.substr(0, 2000);
    return nlohmann::json::parse(r.body).value("id", "");
}

}  // namespace loch::itest
