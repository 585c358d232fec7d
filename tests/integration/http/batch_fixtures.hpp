// Shared by the Batch API suites: input lines, files and uploads as loch's clients send them.
#pragma once

#include <chrono>
#include <fstream>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

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

// Creates a batch of the uploaded text through the HTTP API; its id.
inline std::string create_batch(LochServer& loch, const std::string& text) {
    const auto up = upload_id(loch, text);
    const auto created = loch.post(
        "/v1/batches",
        json{{"input_file_id", up}, {"endpoint", "/v1/chat/completions"}, {"completion_window", "24h"}}
            .dump());
    EXPECT_EQ(created.status, 200) << created.body;
    return json::parse(created.body)["id"];
}

// GET /v1/batches/{id} until `until` holds (or the time is up).
template <class F>
json poll(LochServer& loch, const std::string& id, F until,
          std::chrono::seconds limit = std::chrono::seconds(600)) {
    const auto deadline = std::chrono::steady_clock::now() + limit;
    json b;
    while (std::chrono::steady_clock::now() < deadline) {
        const auto r = loch.get("/v1/batches/" + id);
        if (r.status == 200) {
            b = json::parse(r.body);
            if (until(b)) return b;
        }
        std::this_thread::sleep_for(std::chrono::milliseconds(100));
    }
    ADD_FAILURE() << "batch " << id << " did not get there in time: " << b.dump();
    return b;
}

inline bool ended(const json& b) {
    const std::string s = b.value("status", "");
    return s == "completed" || s == "failed" || s == "expired" || s == "cancelled";
}

inline std::vector<json> file_lines(LochServer& loch, const json& file_id) {
    std::vector<json> out;
    if (!file_id.is_string()) return out;
    const auto r = loch.get("/v1/files/" + file_id.get<std::string>() + "/content");
    EXPECT_EQ(r.status, 200);
    std::istringstream in(r.body);
    for (std::string l; std::getline(in, l);)
        if (!l.empty()) out.push_back(json::parse(l));
    return out;
}

}  // namespace loch::itest
