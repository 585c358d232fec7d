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

}  // namespace
}  // namespace loch::http
