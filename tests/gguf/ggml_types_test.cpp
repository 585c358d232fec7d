#include <gtest/gtest.h>

#include "gguf/ggml_types.hpp"

namespace loch::gguf {
namespace {

void expect_block(GgmlType t, std::uint32_t block, std::uint32_t bytes) {
    const TypeTraits& tr = traits(t);
    EXPECT_EQ(tr.block_size, block) << tr.name;
    EXPECT_EQ(tr.type_size, bytes) << tr.name;
}

TEST(GgmlTypes, BlockSizesMatchGgmlCommon) {
    expect_block(GgmlType::Q4_K, 256, 144);
    expect_block(GgmlType::Q6_K, 256, 210);
    expect_block(GgmlType::Q8_0, 32, 34);
    expect_block(GgmlType::IQ4_XS, 256, 136);
    expect_block(GgmlType::MXFP4, 32, 17);
    expect_block(GgmlType::BF16, 1, 2);
    expect_block(GgmlType::NVFP4, 64, 36);
    expect_block(GgmlType::Q1_0, 128, 18);
    expect_block(GgmlType::IQ1_M, 256, 56);
    expect_block(GgmlType::TQ1_0, 256, 54);
    expect_block(GgmlType::F64, 1, 8);
}

TEST(GgmlTypes, RemovedAndUnknownIdsAreAbsent) {
    for (std::uint32_t id : {4u, 5u, 31u, 32u, 33u, 36u, 37u, 38u, 43u, 1000u, 0xffffffffu}) {
        EXPECT_EQ(find_type(id), nullptr) << id;
    }
    std::size_t known = 0;
    for (std::uint32_t id = 0; id < 64; ++id) {
        if (const TypeTraits* tr = find_type(id)) {
            ++known;
            EXPECT_EQ(static_cast<std::uint32_t>(tr->type), id);
            EXPECT_FALSE(tr->name.empty());
            EXPECT_EQ(tr->quantized, tr->block_size > 1) << tr->name;
        }
    }
    EXPECT_EQ(known, 35u);
}

TEST(GgmlTypes, NamesAndFileTypeNames) {
    EXPECT_EQ(type_from_name("q4_K"), GgmlType::Q4_K);
    EXPECT_EQ(type_from_name("Q4_K"), GgmlType::Q4_K);
    EXPECT_EQ(type_from_name("q4_k_m"), GgmlType::Q4_K);
    EXPECT_EQ(type_from_name("Q4_K_S"), GgmlType::Q4_K);
    EXPECT_EQ(type_from_name("q5_k_m"), GgmlType::Q5_K);
    EXPECT_EQ(type_from_name("q3_k_l"), GgmlType::Q3_K);
    EXPECT_EQ(type_from_name("q8_0"), GgmlType::Q8_0);
    EXPECT_EQ(type_from_name("iq4_xs"), GgmlType::IQ4_XS);
    EXPECT_EQ(type_from_name("iq2_s"), GgmlType::IQ2_S);  // the tensor type wins over the file type
    EXPECT_EQ(type_from_name("iq3_m"), GgmlType::IQ3_S);
    EXPECT_EQ(type_from_name("mxfp4_moe"), GgmlType::MXFP4);
    EXPECT_EQ(type_from_name("BF16"), GgmlType::BF16);
    EXPECT_EQ(type_from_name("f32"), GgmlType::F32);
    EXPECT_FALSE(type_from_name("q4_2").has_value());
    EXPECT_FALSE(type_from_name("").has_value());
}

TEST(GgmlTypes, BytesFor) {
    EXPECT_EQ(bytes_for(GgmlType::Q4_K, 4096 * 4096), 4096ull * 4096 / 256 * 144);
    EXPECT_EQ(bytes_for(GgmlType::F16, 3), 6u);
    EXPECT_FALSE(bytes_for(GgmlType::Q8_0, 33).has_value());         // not whole blocks
    EXPECT_FALSE(bytes_for(GgmlType::F64, 1ull << 62).has_value());  // 2^65 bytes
    EXPECT_EQ(bytes_for(GgmlType::I8, 1ull << 62), 1ull << 62);
}

}  // namespace
}  // namespace loch::gguf
