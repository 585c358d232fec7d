// gguf/ggml_types — the ggml tensor type table: id, name, elements per block, bytes per block.
//
// Sizes follow ggml-common.h of the pinned llama.cpp (de3ff81). Used to size tensors (reader, planner)
// and KV cache rows (q8_0 / q4_0 caches have real block sizes).
#pragma once

#include <cstdint>
#include <optional>
#include <string_view>

namespace loch::gguf {

enum class GgmlType : std::uint32_t {
    F32 = 0,
    F16 = 1,
    Q4_0 = 2,
    Q4_1 = 3,
    Q5_0 = 6,
    Q5_1 = 7,
    Q8_0 = 8,
    Q8_1 = 9,
    Q2_K = 10,
    Q3_K = 11,
    Q4_K = 12,
    Q5_K = 13,
    Q6_K = 14,
    Q8_K = 15,
    IQ2_XXS = 16,
    IQ2_XS = 17,
    IQ3_XXS = 18,
    IQ1_S = 19,
    IQ4_NL = 20,
    IQ3_S = 21,
    IQ2_S = 22,
    IQ4_XS = 23,
    I8 = 24,
    I16 = 25,
    I32 = 26,
    I64 = 27,
    F64 = 28,
    IQ1_M = 29,
    BF16 = 30,
    TQ1_0 = 34,
    TQ2_0 = 35,
    MXFP4 = 39,
    NVFP4 = 40,
    Q1_0 = 41,
    Q2_0 = 42,
};

struct TypeTraits {
    GgmlType type;
    std::string_view name;     // lower case as llama.cpp prints it: "q4_K", "f16", "bf16"
    std::uint32_t block_size;  // elements per block
    std::uint32_t type_size;   // bytes per block
    bool quantized;
};

// nullptr for ids that are unknown or were removed from ggml (4, 5, 31..33, 36..38, >= 43).
const TypeTraits* find_type(std::uint32_t id);
const TypeTraits& traits(GgmlType t);
// Case-insensitive: "q4_k", "Q4_K", "q4_k_m" (a file type name maps to its main tensor type), "f16", "bf16".
std::optional<GgmlType> type_from_name(std::string_view name);
// Bytes for n elements of type t; nullopt when n is not a multiple of the block size or on overflow.
std::optional<std::uint64_t> bytes_for(GgmlType t, std::uint64_t n_elements);

}  // namespace loch::gguf
