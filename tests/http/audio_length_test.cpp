// An upload's audio length from its WAV header; anything else says nothing.
#include <gtest/gtest.h>

#include <cstring>
#include <string>

#include "http/audio_length.hpp"

namespace loch::http {
namespace {

std::string wav(std::uint32_t rate, std::uint32_t data_bytes, std::uint32_t declared,
                bool extra_chunk = false) {
    const auto le = [](std::uint32_t v, int n) {
        std::string s(n, '\0');
        std::memcpy(s.data(), &v, n);
        return s;
    };
    std::string f = "RIFF" + le(36 + data_bytes, 4) + "WAVE";
    if (extra_chunk) f += "LIST" + le(3, 4) + "abc" + std::string(1, '\0');  // odd size: padded
    f += "fmt " + le(16, 4) + le(1, 2) + le(1, 2) + le(rate, 4) + le(rate * 2, 4) + le(2, 2) + le(16, 2);
    f += "data" + le(declared, 4) + std::string(data_bytes, '\0');
    return f;
}

TEST(AudioLength, AWavSaysItsSecondsFromTheByteRate) {
    EXPECT_DOUBLE_EQ(*audio_seconds(wav(16000, 64000, 64000)), 2.0);
    EXPECT_DOUBLE_EQ(*audio_seconds(wav(16000, 32000, 32000, true)), 1.0);  // after another chunk
    // A streamed WAV that does not know its length: the data run to the end.
    EXPECT_DOUBLE_EQ(*audio_seconds(wav(8000, 16000, 0xFFFFFFFFu)), 1.0);
    // A header claiming more than the file holds counts what is there.
    EXPECT_DOUBLE_EQ(*audio_seconds(wav(16000, 32000, 1u << 30)), 1.0);
}

TEST(AudioLength, OtherFormatsAndDamagedHeadersSayNothing) {
    EXPECT_FALSE(audio_seconds("ID3\x04 an mp3"));
    EXPECT_FALSE(audio_seconds("fLaC"));
    EXPECT_FALSE(audio_seconds(""));
    EXPECT_FALSE(audio_seconds(wav(0, 100, 100)));  // a zero byte rate
    const auto w = wav(16000, 100, 100);
    EXPECT_FALSE(audio_seconds(w.substr(0, 30)));  // cut inside fmt
}

}  // namespace
}  // namespace loch::http
