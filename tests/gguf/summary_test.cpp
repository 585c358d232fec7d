#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>

#include "gguf/reader.hpp"
#include "gguf/summary.hpp"
#include "gguf/writer.hpp"

namespace loch::gguf {
namespace {

// Llama-3.1-8B's real shape (untied output) with Q4_K matrices and F32 norms.
Model llama31_8b() {
    Model m;
    auto& md = m.metadata;
    md.set("general.architecture", Value::str("llama"));
    md.set("general.name", Value::str("Llama 3.1 8B"));
    md.set("general.file_type", Value::u32(15));
    md.set("llama.block_count", Value::u32(32));
    md.set("llama.context_length", Value::u32(131072));
    md.set("llama.embedding_length", Value::u32(4096));
    md.set("llama.feed_forward_length", Value::u32(14336));
    md.set("llama.attention.head_count", Value::u32(32));
    md.set("llama.attention.head_count_kv", Value::u32(8));
    md.set("llama.vocab_size", Value::u32(128256));
    md.set("tokenizer.ggml.model", Value::str("gpt2"));
    const auto mat = [&m](std::string name, std::uint64_t a, std::uint64_t b) {
        m.tensors.push_back({std::move(name), {a, b}, GgmlType::Q4_K, 0, 0});
    };
    const auto norm = [&m](std::string name) {
        m.tensors.push_back({std::move(name), {4096}, GgmlType::F32, 0, 0});
    };
    mat("token_embd.weight", 4096, 128256);
    for (int i = 0; i < 32; ++i) {
        const std::string p = "blk." + std::to_string(i) + ".";
        norm(p + "attn_norm.weight");
        mat(p + "attn_q.weight", 4096, 4096);
        mat(p + "attn_k.weight", 4096, 1024);
        mat(p + "attn_v.weight", 4096, 1024);
        mat(p + "attn_output.weight", 4096, 4096);
        norm(p + "ffn_norm.weight");
        mat(p + "ffn_gate.weight", 4096, 14336);
        mat(p + "ffn_up.weight", 4096, 14336);
        mat(p + "ffn_down.weight", 14336, 4096);
    }
    norm("output_norm.weight");
    mat("output.weight", 4096, 128256);
    return m;
}

TEST(GgufSummary, Llama31_8BParameterCountAndShape) {
    const Summary s = summarize(llama31_8b());
    EXPECT_EQ(s.parameter_count, 8030261248ull);
    EXPECT_EQ(format_count(s.parameter_count), "8.03 B");
    EXPECT_EQ(s.architecture, "llama");
    EXPECT_EQ(s.file_type, "Q4_K_M");
    EXPECT_EQ(s.layer_count, 32u);
    EXPECT_EQ(s.head_count.values, std::vector<std::uint64_t>{32});
    EXPECT_EQ(s.head_count_kv.values, std::vector<std::uint64_t>{8});
    EXPECT_EQ(s.key_length, 128u);  // derived: 4096 / 32
    EXPECT_EQ(s.value_length, 128u);
    EXPECT_EQ(s.vocab_size, 128256u);
    EXPECT_FALSE(s.sliding_window.has_value());
    ASSERT_EQ(s.types.size(), 2u);
    EXPECT_EQ(s.types[0].type, GgmlType::Q4_K);
    EXPECT_EQ(s.types[0].bytes, (8030261248ull - 65 * 4096) / 256 * 144);
    EXPECT_EQ(s.types[1].type, GgmlType::F32);
    EXPECT_EQ(s.types[1].bytes, 65u * 4096 * 4);
}

TEST(GgufSummary, SparseFileOfTheFullShapeReadsBack) {
    // Header only on disk: the 4.5 GiB of Q4_K data are a hole.
    char tmpl[] = "/tmp/loch-gguf-summary-XXXXXX";
    const int fd = ::mkstemp(tmpl);
    ASSERT_GE(fd, 0);
    ::close(fd);
    const std::uint64_t size = write_file(tmpl, llama31_8b());
    const Summary s = summarize(read_model(tmpl));
    std::filesystem::remove(tmpl);
    EXPECT_EQ(s.file_size, size);
    EXPECT_EQ(s.parameter_count, 8030261248ull);
    EXPECT_GT(s.file_size, s.tensor_bytes);
    const auto j = to_json(s);
    EXPECT_EQ(j["parameter_count"], 8030261248ull);
    EXPECT_EQ(j["head_count_kv"], 8);
    EXPECT_EQ(j["types"][0]["type"], "q4_K");
    EXPECT_NE(to_text(s).find("8.03 B (8030261248)"), std::string::npos) << to_text(s);
}

TEST(GgufSummary, Gemma3SlidingWindowDefaultPattern) {
    Model m;
    m.metadata.set("general.architecture", Value::str("gemma3"));
    m.metadata.set("gemma3.block_count", Value::u32(8));
    m.metadata.set("gemma3.attention.sliding_window", Value::u32(1024));
    m.metadata.set("gemma3.attention.head_count", Value::u32(8));
    m.metadata.set("gemma3.attention.key_length", Value::u32(256));
    const Summary s = summarize(m);
    EXPECT_EQ(s.sliding_window, 1024u);
    // Period 6: layers 5 is full, 0-4 and 6-7 sliding.
    EXPECT_EQ(s.swa_layers, (std::vector<bool>{true, true, true, true, true, false, true, true}));
    EXPECT_NE(s.swa_pattern_source.find("gemma3"), std::string::npos);
    EXPECT_EQ(s.key_length, 256u);
    EXPECT_EQ(s.head_count_kv.values, std::vector<std::uint64_t>{8});  // absent ⇒ same as heads
    EXPECT_NE(to_text(s).find("SSSSSFSS"), std::string::npos) << to_text(s);
}

TEST(GgufSummary, PerLayerArraysExplicitPatternMoeAndMla) {
    Model m;
    m.metadata.set("general.architecture", Value::str("deepseek2"));
    m.metadata.set("deepseek2.block_count", Value::u32(3));
    m.metadata.set("deepseek2.attention.head_count_kv",
                   Value::array(ValueType::INT32, {Value::i32(0), Value::i32(4), Value::i32(4)}));
    m.metadata.set("deepseek2.attention.sliding_window", Value::u32(128));
    m.metadata.set(
        "deepseek2.attention.sliding_window_pattern",
        Value::array(ValueType::BOOL, {Value::boolean(true), Value::boolean(false), Value::boolean(true)}));
    m.metadata.set("deepseek2.expert_count", Value::u32(64));
    m.metadata.set("deepseek2.expert_used_count", Value::u32(6));
    m.metadata.set("deepseek2.expert_feed_forward_length", Value::u32(1408));
    m.metadata.set("deepseek2.attention.kv_lora_rank", Value::u32(512));
    m.metadata.set("deepseek2.attention.key_length_mla", Value::u32(192));
    const Summary s = summarize(m);
    EXPECT_FALSE(s.head_count_kv.uniform());
    EXPECT_EQ(s.head_count_kv.max(), 4u);
    EXPECT_EQ(s.swa_layers, (std::vector<bool>{true, false, true}));
    EXPECT_EQ(s.swa_pattern_source, "metadata");
    EXPECT_EQ(s.expert_count, 64u);
    EXPECT_EQ(s.expert_used_count, 6u);
    EXPECT_EQ(s.kv_lora_rank, 512u);
    EXPECT_EQ(s.key_length_mla, 192u);
    const auto j = to_json(s);
    EXPECT_EQ(j["head_count_kv"], nlohmann::json({0, 4, 4}));
    EXPECT_EQ(j["experts"]["feed_forward_length"], 1408);
    EXPECT_EQ(j["mla"]["kv_lora_rank"], 512);
}

TEST(GgufSummary, Formatting) {
    EXPECT_EQ(format_count(494032768), "494.0 M");
    EXPECT_EQ(format_count(999), "999");
    EXPECT_EQ(format_bytes(100), "100 B");
    EXPECT_EQ(format_bytes(3ull << 29), "1.50 GiB");
    EXPECT_EQ(file_type_name(15), "Q4_K_M");
    EXPECT_EQ(file_type_name(4), "");
}

}  // namespace
}  // namespace loch::gguf
