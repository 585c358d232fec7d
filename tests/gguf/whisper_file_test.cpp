// whisper.cpp's model format: what loch-synth writes is what whisper.cpp's loader expects (the tensor table
// of its shape, in order), the reader takes it back, and damaged files are FormatErrors with the offset.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>

#include "gguf/reader.hpp"
#include "gguf/whisper_file.hpp"
#include "support/temp_dir.hpp"

namespace loch::gguf {
namespace {

WhisperHparams small_shape() {
    WhisperHparams hp;
    hp.n_vocab = 300;
    hp.n_audio_ctx = 16;
    hp.n_audio_state = hp.n_text_state = 64;
    hp.n_audio_head = hp.n_text_head = 2;
    hp.n_audio_layer = 1;
    hp.n_text_layer = 2;
    hp.n_text_ctx = 8;
    hp.n_mels = 8;
    return hp;
}

TEST(WhisperFile, ATableOfTheRealTinyShapeHasWhisperCppsTensorCountAndSize) {
    WhisperHparams tiny;  // the defaults are whisper-tiny
    const auto t = whisper_tensors(tiny);
    // whisper.cpp: 7 encoder tensors + 15 per encoder layer, 4 decoder + 24 per decoder layer.
    EXPECT_EQ(t.size(), 7u + 15 * 4 + 4 + 24 * 4);
    std::uint64_t bytes = 0;
    for (const auto& x : t) bytes += x.bytes;
    EXPECT_NEAR(double(bytes) / 1e6, 77.11, 0.005);
    EXPECT_EQ(t[1].name, "encoder.conv1.weight");
    EXPECT_EQ(t[1].type, GgmlType::F16);
    EXPECT_EQ(t[1].ne, (std::vector<std::int64_t>{3, 80, 384}));
}

TEST(WhisperFile, WhatIsWrittenReadsBackWithEveryTensorAndItsData) {
    const auto hp = small_shape();
    const auto bytes = serialize_whisper(hp);
    const auto f = parse_whisper(bytes);
    EXPECT_EQ(f.hp.n_vocab, 300);
    EXPECT_EQ(f.hp.n_text_layer, 2);
    EXPECT_EQ(f.vocab_tokens, 300u);
    EXPECT_EQ(f.mel_filters, 8u);
    ASSERT_EQ(f.tensors.size(), whisper_tensors(hp).size());
    EXPECT_EQ(f.tensors.back().name, "decoder.blocks.1.cross_attn.out.bias");
    EXPECT_EQ(f.tensors.back().data_offset + f.tensors.back().bytes, bytes.size());

    test::TempDir dir("loch-whisper-file");
    const auto path = dir.path() / "m.bin";
    EXPECT_EQ(write_whisper(path, hp), bytes.size());
    EXPECT_EQ(std::filesystem::file_size(path), bytes.size());
    EXPECT_EQ(read_whisper(path).tensors.size(), f.tensors.size());
    // Without tensors (whisper.cpp's "empty model for testing"): the header alone.
    EXPECT_TRUE(parse_whisper(serialize_whisper(hp, false)).tensors.empty());
}

TEST(WhisperFile, QuantizedWeightsKeepF32NormsAndF16Convolutions) {
    auto hp = small_shape();
    hp.ftype = *whisper_ftype_of(GgmlType::Q8_0);
    EXPECT_EQ(whisper_weight_type(hp.ftype), GgmlType::Q8_0);
    for (const auto& t : whisper_tensors(hp)) {
        if (t.name == "encoder.conv2.weight") EXPECT_EQ(t.type, GgmlType::F16);
        if (t.name == "decoder.ln.weight") EXPECT_EQ(t.type, GgmlType::F32);
        if (t.name == "decoder.token_embedding.weight") EXPECT_EQ(t.type, GgmlType::Q8_0);
    }
    hp.ftype = 5;  // a removed type
    EXPECT_THROW(whisper_tensors(hp), std::invalid_argument);
}

TEST(WhisperFile, DamagedFilesAreFormatErrorsNamingWhatIsWrong) {
    const auto good = serialize_whisper(small_shape());
    const auto fails_with = [](std::vector<std::byte> b, const std::string& what) {
        try {
            parse_whisper(b, "bad.bin");
            ADD_FAILURE() << "parsed: " << what;
        } catch (const FormatError& e) {
            EXPECT_NE(std::string(e.what()).find(what), std::string::npos) << e.what();
        }
    };
    fails_with({good.begin(), good.begin() + 3}, "file ends");
    auto magic = good;
    magic[0] = std::byte{'x'};
    fails_with(magic, "bad magic");
    fails_with({good.begin(), good.end() - 1}, "only");  // the last tensor's data is one byte short
    auto huge = good;
    huge[4 * 12] = std::byte{0xff}, huge[4 * 12 + 1] = std::byte{0xff}, huge[4 * 12 + 2] = std::byte{0xff};
    fails_with(huge, "filter bank");  // n_mel of the filters claims 16 M rows
    EXPECT_FALSE(is_whisper_file(std::span(good).first(3)));
    EXPECT_TRUE(is_whisper_file(good));
}

}  // namespace
}  // namespace loch::gguf
