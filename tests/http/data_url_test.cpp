// Inline images in chat requests: read from their data URL's header before anything starts, or refused with
// the reason (a URL to fetch, bad base64, another format, a damaged header).
#include <gtest/gtest.h>

#include <string>

#include "broker/error.hpp"
#include "http/data_url.hpp"
#include "http/openai_request.hpp"
#include "support/data_url.hpp"
#include "support/image_bytes.hpp"

namespace loch::http {
namespace {

std::string b64(const std::string& bin) {
    return test::base64(bin);
}

using test::jpeg;
using test::png;

std::string error_of(const std::string& url) {
    try {
        read_image_url(url, "messages[0].content[1].image_url");
    } catch (const broker::Error& e) {
        return e.what();
    }
    return "";
}

TEST(DataUrl, PngAndJpegSizesAreReadFromTheirHeaders) {
    const auto p = read_image_url("data:image/png;base64," + b64(png(640, 480)), "x");
    EXPECT_EQ(p.format, "png");
    EXPECT_EQ(p.width, 640u);
    EXPECT_EQ(p.height, 480u);
    EXPECT_EQ(p.bytes, png(640, 480).size());
    // A JPEG whose size marker sits behind a 64 KiB EXIF block: past the first decoded prefix.
    const auto j = read_image_url("data:image/jpeg;base64," + b64(jpeg(4032, 3024, 65000)), "x");
    EXPECT_EQ(j.format, "jpeg");
    EXPECT_EQ(j.width, 4032u);
    EXPECT_EQ(j.height, 3024u);
}

TEST(DataUrl, WhatCannotBeReadIsRefusedWithTheReasonAndWhereItIs) {
    EXPECT_NE(error_of("https://example.com/cat.png").find("not a data URL"), std::string::npos);
    EXPECT_NE(error_of("https://example.com/cat.png").find("messages[0].content[1].image_url"),
              std::string::npos);
    EXPECT_NE(error_of("data:image/png,rawbytes").find("base64"), std::string::npos);
    EXPECT_NE(error_of("data:image/png;base64,abc").find("not valid"), std::string::npos);
    EXPECT_NE(error_of("data:image/png;base64,ab!d").find("not valid"), std::string::npos);
    EXPECT_NE(error_of("data:image/gif;base64," + b64("GIF89a......")).find("not a PNG or a JPEG"),
              std::string::npos);
    EXPECT_NE(error_of("data:image/png;base64," + b64(png(0, 480))).find("damaged"), std::string::npos);
    EXPECT_NE(error_of("data:image/png;base64," + b64(png(640, 480).substr(0, 12))).find("damaged"),
              std::string::npos);
}

TEST(DataUrl, AChatRequestCarriesItsImagesAndTheirBytesAreNotPromptText) {
    const std::string url = "data:image/png;base64," + b64(png(1024, 768, 3000));
    const nlohmann::json body = {{"model", "vl"},
                                 {"messages",
                                  {{{"role", "user"},
                                    {"content",
                                     {{{"type", "text"}, {"text", "Describe"}},
                                      {{"type", "image_url"}, {"image_url", {{"url", url}}}},
                                      {{"type", "image_url"}, {"image_url", url}}}}}}}};
    const auto r = parse_openai_request(Endpoint::chat_completions, body.dump());
    ASSERT_EQ(r.images.size(), 2u);
    EXPECT_EQ(r.images[0].width, 1024u);
    EXPECT_EQ(r.images[1].height, 768u);
    EXPECT_EQ(r.prompt_bytes, 8u);  // "Describe"
    nlohmann::json remote = body;
    remote["messages"][0]["content"][1]["image_url"]["url"] = "http://x/y.png";
    try {
        parse_openai_request(Endpoint::chat_completions, remote.dump());
        ADD_FAILURE() << "a URL to fetch was taken";
    } catch (const broker::Error& e) {
        EXPECT_NE(std::string(e.what()).find("messages[0].content[1].image_url"), std::string::npos)
            << e.what();
    }
}

// Issue 53: the Responses API's and Anthropic's image parts go through the same reading (and so the same
// checks and cost) as chat completions', instead of reaching the engine unread.
TEST(DataUrl, ResponsesAndAnthropicImagePartsAreReadToo) {
    const std::string data = b64(png(640, 480, 100));
    const nlohmann::json responses = {
        {"model", "vl"},
        {"input",
         {{{"role", "user"},
           {"content",
            {{{"type", "input_text"}, {"text", "Describe"}},
             {{"type", "input_image"}, {"image_url", "data:image/png;base64," + data}}}}}}}};
    auto r = parse_openai_request(Endpoint::responses, responses.dump());
    ASSERT_EQ(r.images.size(), 1u);
    EXPECT_EQ(r.images[0].width, 640u);
    EXPECT_EQ(r.prompt_bytes, 8u);

    const nlohmann::json messages = {
        {"model", "vl"},
        {"max_tokens", 16},
        {"messages",
         {{{"role", "user"},
           {"content",
            {{{"type", "text"}, {"text", "Describe"}},
             {{"type", "image"},
              {"source", {{"type", "base64"}, {"media_type", "image/png"}, {"data", data}}}}}}}}}};
    r = parse_openai_request(Endpoint::anthropic_messages, messages.dump());
    ASSERT_EQ(r.images.size(), 1u);
    EXPECT_EQ(r.images[0].height, 480u);

    const auto refused = [](Endpoint e, const nlohmann::json& body) {
        try {
            parse_openai_request(e, body.dump());
        } catch (const broker::Error& err) {
            return std::string(err.what());
        }
        return std::string("accepted");
    };
    auto remote = messages;
    remote["messages"][0]["content"][1]["source"] = {{"type", "url"}, {"url", "https://x/y.png"}};
    EXPECT_NE(refused(Endpoint::anthropic_messages, remote).find("messages[0].content[1].source"),
              std::string::npos);
    auto no_data = messages;
    no_data["messages"][0]["content"][1]["source"].erase("data");
    EXPECT_NE(refused(Endpoint::anthropic_messages, no_data).find("\"type\": \"base64\""), std::string::npos);
    auto by_id = responses;
    by_id["input"][0]["content"][1] = {{"type", "input_image"}, {"file_id", "file-1"}};
    EXPECT_NE(refused(Endpoint::responses, by_id).find("input[0].content[1]: an image by file_id"),
              std::string::npos);
}

}  // namespace
}  // namespace loch::http
