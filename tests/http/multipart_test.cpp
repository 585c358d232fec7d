// The multipart/form-data reader, the image-header reader and the image-edit request built on them: what
// loch routes and costs an upload by, and the clear errors for a body that is not a form.
#include <gtest/gtest.h>

#include "broker/error.hpp"
#include "http/image_size.hpp"
#include "http/multipart.hpp"
#include "http/openai_request.hpp"
#include "support/image_bytes.hpp"

using namespace loch::http;

namespace {

using loch::test::jpeg;
using loch::test::png;

std::string form(const std::vector<std::pair<std::string, std::string>>& fields, const std::string& image) {
    std::string b;
    for (const auto& [k, v] : fields)
        b += "--XyZ\r\nContent-Disposition: form-data; name=\"" + k + "\"\r\n\r\n" + v + "\r\n";
    if (!image.empty())
        b += "--XyZ\r\nContent-Disposition: form-data; name=\"image\"; filename=\"in.png\"\r\n"
             "Content-Type: image/png\r\n\r\n" +
             image + "\r\n";
    return b + "--XyZ--\r\n";
}
constexpr const char* kType = "multipart/form-data; boundary=XyZ";

}  // namespace

TEST(Multipart, TheBoundaryComesFromTheContentTypeQuotedOrNot) {
    EXPECT_EQ(form_boundary("multipart/form-data; boundary=XyZ"), "XyZ");
    EXPECT_EQ(form_boundary("Multipart/Form-Data;boundary=\"a b;c\""), "a b;c");
    EXPECT_EQ(form_boundary("application/json"), std::nullopt);
    EXPECT_EQ(form_boundary("multipart/form-data"), std::nullopt);
    EXPECT_EQ(form_boundary("multipart/form-data; boundary=" + std::string(71, 'x')), std::nullopt);
}

TEST(Multipart, PartsKeepTheirNamesFilenamesTypesAndExactBytes) {
    const std::string binary("a\r\n--XyY almost the boundary\0\xff", 29);
    const auto body = form({{"model", "images"}, {"prompt", "two\r\nlines"}}, binary);
    const auto parts = read_form(body, "XyZ");
    ASSERT_EQ(parts.size(), 3u);
    EXPECT_EQ(parts[0].name, "model");
    EXPECT_EQ(parts[0].value, "images");
    EXPECT_EQ(parts[1].value, "two\r\nlines");
    EXPECT_EQ(parts[2].filename, "in.png");
    EXPECT_EQ(parts[2].content_type, "image/png");
    EXPECT_EQ(parts[2].value, binary);
}

TEST(Multipart, AMalformedBodyIsAClearError) {
    for (const std::string& bad :
         {std::string(""), std::string("--XyZ\r\nContent-Disposition: form-data\r\n\r\nx"),
          std::string("--XyZ\r\nno colon here\r\n\r\nx\r\n--XyZ--"),
          std::string("--XyZ\r\nContent-Disposition: attachment; name=a\r\n\r\nx\r\n--XyZ--"),
          std::string("--XyZ\r\nContent-Disposition: form-data; name=a\r\n\r\nnever ends")}) {
        try {
            read_form(bad, "XyZ");
            ADD_FAILURE() << "accepted: " << bad;
        } catch (const loch::broker::Error& e) {
            EXPECT_NE(std::string(e.what()).find("multipart/form-data body"), std::string::npos);
        }
    }
}

TEST(ImageSize, PngAndJpegHeadersGiveTheSizeAndAnythingElseNothing) {
    EXPECT_EQ(image_size(png(640, 480)), (std::pair<std::uint32_t, std::uint32_t>{640, 480}));
    EXPECT_EQ(image_size(jpeg(1024, 768)), (std::pair<std::uint32_t, std::uint32_t>{1024, 768}));
    EXPECT_EQ(image_size(png(640, 480).substr(0, 20)), std::nullopt);
    EXPECT_EQ(image_size(jpeg(1024, 768).substr(0, 28)), std::nullopt);
    EXPECT_EQ(image_size("GIF89a"), std::nullopt);
    EXPECT_EQ(image_size(png(0, 480)), std::nullopt);
}

TEST(ImageEdits, TheFormIsReadForTheModelAndTheSizeComesFromTheImageWhenNotGiven) {
    const auto r = parse_openai_request(
        Endpoint::image_edits, form({{"model", "images"}, {"prompt", "a cat"}, {"n", "2"}}, png(768, 512)),
        kType);
    EXPECT_EQ(r.model, "images");
    EXPECT_EQ(r.body["n"], 2);
    EXPECT_EQ(r.body["size"], "768x512");
    EXPECT_EQ(r.body["image"]["file_bytes"], png(768, 512).size());
    const auto sized = parse_openai_request(
        Endpoint::image_edits,
        form({{"model", "images"}, {"prompt", "a cat"}, {"size", "256x256"}}, png(768, 512)), kType);
    EXPECT_EQ(sized.body["size"], "256x256");
}

TEST(ImageEdits, MissingPartsAndWrongBodiesAreRefusedBeforeAnythingStarts) {
    const auto refused = [](const std::string& body, const std::string& type, const std::string& says) {
        try {
            parse_openai_request(Endpoint::image_edits, body, type);
            ADD_FAILURE() << "accepted";
        } catch (const loch::broker::Error& e) {
            EXPECT_EQ(e.kind(), loch::broker::ErrorKind::invalid_request);
            EXPECT_NE(std::string(e.what()).find(says), std::string::npos) << e.what();
        }
    };
    refused(form({{"model", "images"}, {"prompt", "a cat"}}, ""), kType, "'image'");
    refused(form({{"prompt", "a cat"}}, png(64, 64)), kType, "'model'");
    refused(form({{"model", "images"}, {"prompt", "a cat"}, {"size", "huge"}}, png(64, 64)), kType, "'size'");
    refused("{\"model\":\"images\"}", "application/json", "multipart/form-data");
}

namespace {

std::string audio_form(const std::vector<std::pair<std::string, std::string>>& fields,
                       const std::string& wav) {
    std::string b;
    for (const auto& [k, v] : fields)
        b += "--XyZ\r\nContent-Disposition: form-data; name=\"" + k + "\"\r\n\r\n" + v + "\r\n";
    if (!wav.empty())
        b += "--XyZ\r\nContent-Disposition: form-data; name=\"file\"; filename=\"a.wav\"\r\n"
             "Content-Type: audio/wav\r\n\r\n" +
             wav + "\r\n";
    return b + "--XyZ--\r\n";
}
// A 16 kHz mono 16-bit WAV header with `seconds` of silence.
std::string wav(double seconds) {
    const auto data = static_cast<std::uint32_t>(seconds * 32000);
    const auto le = [](std::uint32_t v, int n) { return std::string(reinterpret_cast<const char*>(&v), n); };
    return "RIFF" + le(36 + data, 4) + "WAVEfmt " + le(16, 4) + le(1, 2) + le(1, 2) + le(16000, 4) +
           le(32000, 4) + le(2, 2) + le(16, 2) + "data" + le(data, 4) + std::string(data, '\0');
}

}  // namespace

TEST(AudioRequests, TheFormNamesTheModelAndTheFileItsLength) {
    for (const auto e : {Endpoint::audio_transcriptions, Endpoint::audio_translations}) {
        const auto r = parse_openai_request(
            e,
            audio_form({{"model", "whisper"}, {"response_format", "srt"}, {"temperature", "0.2"}}, wav(1.5)),
            kType);
        EXPECT_EQ(r.model, "whisper");
        EXPECT_FALSE(r.stream);
        EXPECT_EQ(r.body["file"]["file_bytes"], wav(1.5).size());
        EXPECT_DOUBLE_EQ(r.body["file"]["seconds"].get<double>(), 1.5);
    }
}

TEST(AudioRequests, AMissingFileOrABadFormatOrTemperatureIsRefusedBeforeAnythingStarts) {
    const auto refused = [](const std::string& body, const std::string& says) {
        try {
            parse_openai_request(Endpoint::audio_transcriptions, body, kType);
            ADD_FAILURE() << "accepted";
        } catch (const loch::broker::Error& e) {
            EXPECT_EQ(e.kind(), loch::broker::ErrorKind::invalid_request);
            EXPECT_NE(std::string(e.what()).find(says), std::string::npos) << e.what();
        }
    };
    refused(audio_form({{"model", "whisper"}}, ""), "'file'");
    refused(audio_form({{"file", "not a file part"}, {"model", "whisper"}}, ""), "'file'");
    refused(audio_form({{"model", "whisper"}, {"response_format", "mp3"}}, wav(0.1)), "'response_format'");
    refused(audio_form({{"model", "whisper"}, {"temperature", "hot"}}, wav(0.1)), "'temperature'");
    refused(audio_form({{"model", "whisper"}, {"temperature", "1.5"}}, wav(0.1)), "'temperature'");
    refused(audio_form({}, wav(0.1)), "'model'");
}
