// Written files: deterministic bytes, no NaN/Inf in generated weights, sparse zeros for big presets, and a
// vocabulary llama.cpp accepts (unique strings, byte tokens, count == embedding rows).
#include <gtest/gtest.h>
#include <sys/stat.h>

#include <cmath>
#include <cstring>
#include <fstream>
#include <iterator>
#include <set>

#include "gguf/reader.hpp"
#include "gguf/writer.hpp"
#include "support/temp_dir.hpp"
#include "synth/synth.hpp"

namespace loch::synth {
namespace {

using gguf::GgmlType;

std::vector<unsigned char> read_file(const std::filesystem::path& p) {
    std::ifstream in(p, std::ios::binary);
    return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}

float half_to_float(std::uint16_t h) {
    const std::uint32_t sign = (h >> 15) & 1, exp = (h >> 10) & 0x1f, mant = h & 0x3ff;
    if (exp == 0x1f) return mant ? NAN : (sign ? -INFINITY : INFINITY);
    const float v = exp == 0
                        ? std::ldexp(static_cast<float>(mant), -24)
                        : std::ldexp(1.0f + static_cast<float>(mant) / 1024.0f, static_cast<int>(exp) - 15);
    return sign ? -v : v;
}

// Offsets of the fp16 scale fields inside one block, per ggml-common.h.
std::vector<int> scale_offsets(GgmlType t) {
    switch (t) {
        case GgmlType::Q4_0:
        case GgmlType::Q5_0:
        case GgmlType::Q8_0:
            return {0};
        case GgmlType::Q4_1:
        case GgmlType::Q5_1:
        case GgmlType::Q4_K:
        case GgmlType::Q5_K:
            return {0, 2};
        case GgmlType::Q2_K:
            return {80, 82};
        case GgmlType::Q3_K:
            return {108};
        case GgmlType::Q6_K:
            return {208};
        default:
            return {};
    }
}

// Checks every float and every quantization scale in the file is finite; returns how many were non-zero.
std::uint64_t check_finite(const gguf::Model& model, const std::vector<unsigned char>& bytes) {
    const auto layout = gguf::layout(model);
    std::uint64_t nonzero = 0;
    for (std::size_t i = 0; i < model.tensors.size(); ++i) {
        const auto& t = model.tensors[i];
        const unsigned char* data = bytes.data() + layout.data_offset + layout.tensor_offsets[i];
        const auto& tr = gguf::traits(t.type);
        const std::uint64_t n_blocks = t.n_bytes() / tr.type_size;
        for (std::uint64_t b = 0; b < n_blocks; ++b) {
            const unsigned char* blk = data + b * tr.type_size;
            float v = 0.0f;
            std::vector<float> values;
            if (t.type == GgmlType::F32) {
                std::memcpy(&v, blk, 4);
                values.push_back(v);
            } else if (t.type == GgmlType::F16) {
                std::uint16_t h;
                std::memcpy(&h, blk, 2);
                values.push_back(half_to_float(h));
            } else if (t.type == GgmlType::BF16) {
                std::uint16_t h;
                std::memcpy(&h, blk, 2);
                const std::uint32_t bits = std::uint32_t{h} << 16;
                std::memcpy(&v, &bits, 4);
                values.push_back(v);
            } else {
                const auto offs = scale_offsets(t.type);
                EXPECT_FALSE(offs.empty()) << "unexpected type in " << t.name;
                for (int o : offs) {
                    std::uint16_t h;
                    std::memcpy(&h, blk + o, 2);
                    values.push_back(half_to_float(h));
                }
            }
            for (float x : values) {
                if (!std::isfinite(x)) {
                    ADD_FAILURE() << t.name << " block " << b << " holds " << x;
                    return nonzero;
                }
                if (x != 0.0f) ++nonzero;
            }
        }
    }
    return nonzero;
}

TEST(Write, SameArgumentsGiveSameBytes) {
    test::TempDir dir;
    const auto model = build_model(find_preset("tiny-qwen3moe")->shape, "q4_k_m");
    write_model(dir / "a.gguf", model, Weights::small);
    write_model(dir / "b.gguf", build_model(find_preset("tiny-qwen3moe")->shape, "q4_k_m"), Weights::small);
    const auto a = read_file(dir / "a.gguf");
    const auto b = read_file(dir / "b.gguf");
    ASSERT_EQ(a.size(), model.file_size);
    EXPECT_TRUE(a == b) << "two writes of the same model differ";

    // Different weights mode or quantization must change the bytes (the comparison above is not vacuous).
    write_model(dir / "c.gguf", model, Weights::zeros);
    EXPECT_FALSE(a == read_file(dir / "c.gguf"));
}

TEST(Write, SmallWeightsAreFiniteForEveryQuantization) {
    test::TempDir dir;
    for (const auto& q : quant_names()) {
        const auto model = build_model(find_preset("tiny-llama")->shape, q);
        const auto path = dir / (q + ".gguf");
        EXPECT_EQ(write_model(path, model, Weights::small), model.file_size) << q;
        const auto bytes = read_file(path);
        ASSERT_EQ(bytes.size(), model.file_size) << q;
        EXPECT_GT(check_finite(model, bytes), 1000u) << q << ": small weights should not be all zeros";
    }
}

// The demo's brief weights (synth.hpp): the values planted where the logits are read, and nowhere else.
TEST(Write, BriefWeightsPlantTheEndOfTextAndHiLogitsAndTheEmbeddingComponent) {
    test::TempDir dir;
    const auto model = build_model(find_preset("demo")->shape, "q8_0");
    const auto path = dir / "demo.gguf";
    write_model(path, model, Weights::brief);
    const auto bytes = read_file(path);
    const auto layout = gguf::layout(model);
    const auto q8_value = [&](const std::string& tensor, std::uint64_t row, std::uint64_t element) {
        std::size_t i = 0;
        while (model.tensors[i].name != tensor) ++i;
        const auto& t = model.tensors[i];
        const std::uint64_t row_bytes = t.dims[0] / 32 * 34;
        const std::size_t at =
            layout.data_offset + layout.tensor_offsets[i] + row * row_bytes + element / 32 * 34;
        _Float16 d;
        std::memcpy(&d, &bytes[at], 2);
        return static_cast<float>(d) *
               static_cast<float>(static_cast<std::int8_t>(bytes[at + 2 + element % 32]));
    };
    const auto* embd = model.find_tensor("token_embd.weight");
    ASSERT_EQ(embd->type, gguf::GgmlType::Q8_0);
    for (const std::uint64_t row : {std::uint64_t{0}, std::uint64_t{7}, embd->dims[1] - 1}) {
        EXPECT_NEAR(q8_value("token_embd.weight", row, 0), 8.0f, 0.01f) << row;
        EXPECT_EQ(q8_value("token_embd.weight", row, 1), 0.0f) << row;  // the rest of the block zeroed
    }
    const float scale = std::sqrt(512.0f);
    EXPECT_NEAR(q8_value("output.weight", 2, 0) * scale, 11.5f, 0.05f);  // </s>
    const float hi = q8_value("output.weight", 760, 0) * scale;          // "▁hi"
    EXPECT_NEAR(hi, 12.5f, 0.05f);
    EXPECT_LT(std::abs(q8_value("output.weight", 761, 0)), 0.2f);  // any other token: a small value
    EXPECT_GT(check_finite(model, bytes), 1000u);
    // Not the small weights' bytes.
    write_model(dir / "small.gguf", model, Weights::small);
    EXPECT_FALSE(bytes == read_file(dir / "small.gguf"));
}

TEST(Write, ZeroWeightsOfABigPresetAreASparseFile) {
    test::TempDir dir;
    const auto model = build_model(find_preset("llama-3.1-8b")->shape, "q4_k_m");
    const auto path = dir / "llama8b.gguf";
    EXPECT_EQ(write_model(path, model, Weights::zeros), model.file_size);
    EXPECT_EQ(std::filesystem::file_size(path), model.file_size);
    struct stat st {};
    ASSERT_EQ(::stat(path.c_str(), &st), 0);
    EXPECT_LT(static_cast<std::uint64_t>(st.st_blocks) * 512, std::uint64_t{64} << 20)
        << "a 4.9 GB model of zeros should occupy only its header on disk";
}

TEST(Write, VocabularyIsWhatLlamaCppNeeds) {
    const auto model = build_model(find_preset("tiny-gemma3")->shape, "f16");
    const auto* tokens = model.metadata.find("tokenizer.ggml.tokens");
    ASSERT_NE(tokens, nullptr);
    ASSERT_NE(tokens->as_array(), nullptr);
    const auto& items = tokens->as_array()->items;
    ASSERT_EQ(items.size(), 512u);
    EXPECT_EQ(model.find_tensor("token_embd.weight")->dims[1], items.size());
    std::set<std::string> unique;
    for (const auto& v : items) unique.insert(*v.as_string());
    EXPECT_EQ(unique.size(), items.size()) << "llama.cpp asserts token strings are unique";
    EXPECT_TRUE(unique.count("<0x0A>")) << "SPM needs the newline byte token";
    EXPECT_EQ(model.metadata.get_string("tokenizer.ggml.model"), "llama");
    EXPECT_EQ(model.metadata.find("tokenizer.ggml.scores")->as_array()->items.size(), items.size());
    EXPECT_EQ(model.metadata.find("tokenizer.ggml.token_type")->as_array()->items.size(), items.size());
}

TEST(Write, WeightsNames) {
    EXPECT_EQ(parse_weights("zeros"), Weights::zeros);
    EXPECT_EQ(parse_weights("small"), Weights::small);
    EXPECT_THROW(parse_weights("random"), SynthError);
}

}  // namespace
}  // namespace loch::synth

namespace loch::synth {
namespace {

// What loch inspect will see: the reader gets back exactly the model we built, with the real count.
TEST(Write, ReaderSeesTheBuiltModel) {
    test::TempDir dir;
    const auto built = build_model(find_preset("llama-3.1-8b")->shape, "q4_k");
    const auto path = dir / "llama8b-q4k.gguf";
    write_model(path, built, Weights::zeros);
    const auto read = gguf::read_model(path);
    EXPECT_NEAR(static_cast<double>(read.parameter_count()) / 1e9, 8.03, 8.03 * 0.005);
    EXPECT_EQ(read.parameter_count(), built.parameter_count());
    EXPECT_EQ(read.file_size, built.file_size);
    ASSERT_EQ(read.tensors.size(), built.tensors.size());
    for (std::size_t i = 0; i < read.tensors.size(); ++i) {
        EXPECT_EQ(read.tensors[i].name, built.tensors[i].name);
        EXPECT_EQ(read.tensors[i].dims, built.tensors[i].dims);
        EXPECT_EQ(read.tensors[i].type, built.tensors[i].type);
        EXPECT_EQ(read.tensors[i].offset, built.tensors[i].offset);
    }
    EXPECT_EQ(read.metadata.entries().size(), built.metadata.entries().size());
    EXPECT_EQ(read.architecture(), "llama");
}

}  // namespace
}  // namespace loch::synth
