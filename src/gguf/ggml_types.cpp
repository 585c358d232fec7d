#include "gguf/ggml_types.hpp"
#include "core/text.hpp"

#include <algorithm>
#include <array>
#include <cctype>
#include <limits>
#include <string>

namespace loch::gguf {
namespace {

// Indexed by type id; block sizes and bytes per block are sizeof(block_*) from ggml-common.h (de3ff81).
constexpr std::uint32_t kTypeCount = 43;
constexpr TypeTraits kNone{GgmlType::F32, {}, 0, 0, false};
constexpr TypeTraits make(GgmlType t, std::string_view name, std::uint32_t block, std::uint32_t size,
                          bool q) {
    return TypeTraits{t, name, block, size, q};
}

constexpr std::array<TypeTraits, kTypeCount> build_table() {
    std::array<TypeTraits, kTypeCount> t{};
    for (auto& e : t) e = kNone;
    auto put = [&t](TypeTraits tr) { t[static_cast<std::uint32_t>(tr.type)] = tr; };
    put(make(GgmlType::F32, "f32", 1, 4, false));
    put(make(GgmlType::F16, "f16", 1, 2, false));
    put(make(GgmlType::Q4_0, "q4_0", 32, 18, true));
    put(make(GgmlType::Q4_1, "q4_1", 32, 20, true));
    put(make(GgmlType::Q5_0, "q5_0", 32, 22, true));
    put(make(GgmlType::Q5_1, "q5_1", 32, 24, true));
    put(make(GgmlType::Q8_0, "q8_0", 32, 34, true));
    put(make(GgmlType::Q8_1, "q8_1", 32, 36, true));
    put(make(GgmlType::Q2_K, "q2_K", 256, 84, true));
    put(make(GgmlType::Q3_K, "q3_K", 256, 110, true));
    put(make(GgmlType::Q4_K, "q4_K", 256, 144, true));
    put(make(GgmlType::Q5_K, "q5_K", 256, 176, true));
    put(make(GgmlType::Q6_K, "q6_K", 256, 210, true));
    put(make(GgmlType::Q8_K, "q8_K", 256, 292, true));
    put(make(GgmlType::IQ2_XXS, "iq2_xxs", 256, 66, true));
    put(make(GgmlType::IQ2_XS, "iq2_xs", 256, 74, true));
    put(make(GgmlType::IQ3_XXS, "iq3_xxs", 256, 98, true));
    put(make(GgmlType::IQ1_S, "iq1_s", 256, 50, true));
    put(make(GgmlType::IQ4_NL, "iq4_nl", 32, 18, true));
    put(make(GgmlType::IQ3_S, "iq3_s", 256, 110, true));
    put(make(GgmlType::IQ2_S, "iq2_s", 256, 82, true));
    put(make(GgmlType::IQ4_XS, "iq4_xs", 256, 136, true));
    put(make(GgmlType::I8, "i8", 1, 1, false));
    put(make(GgmlType::I16, "i16", 1, 2, false));
    put(make(GgmlType::I32, "i32", 1, 4, false));
    put(make(GgmlType::I64, "i64", 1, 8, false));
    put(make(GgmlType::F64, "f64", 1, 8, false));
    put(make(GgmlType::IQ1_M, "iq1_m", 256, 56, true));
    put(make(GgmlType::BF16, "bf16", 1, 2, false));
    put(make(GgmlType::TQ1_0, "tq1_0", 256, 54, true));
    put(make(GgmlType::TQ2_0, "tq2_0", 256, 66, true));
    put(make(GgmlType::MXFP4, "mxfp4", 32, 17, true));
    put(make(GgmlType::NVFP4, "nvfp4", 64, 36, true));
    put(make(GgmlType::Q1_0, "q1_0", 128, 18, true));
    put(make(GgmlType::Q2_0, "q2_0", 64, 18, true));
    return t;
}

constexpr auto kTable = build_table();

// llama.cpp file types (llama_ftype names as llama-quantize takes them) → their main tensor type
// (llama-quant.cpp, default_type). Tensor type names are looked up first, so "iq2_s" is the tensor type.
struct FileTypeName {
    std::string_view name;
    GgmlType type;
};
constexpr FileTypeName kFileTypes[] = {
    {"q2_k_s", GgmlType::Q2_K}, {"q3_k_s", GgmlType::Q3_K}, {"q3_k_m", GgmlType::Q3_K},
    {"q3_k_l", GgmlType::Q3_K}, {"q4_k_s", GgmlType::Q4_K}, {"q4_k_m", GgmlType::Q4_K},
    {"q5_k_s", GgmlType::Q5_K}, {"q5_k_m", GgmlType::Q5_K}, {"iq3_xs", GgmlType::IQ3_S},
    {"iq3_m", GgmlType::IQ3_S}, {"iq2_m", GgmlType::IQ2_S}, {"mxfp4_moe", GgmlType::MXFP4},
    {"all_f32", GgmlType::F32},
};

}  // namespace

const TypeTraits* find_type(std::uint32_t id) {
    if (id >= kTypeCount || kTable[id].block_size == 0) return nullptr;
    return &kTable[id];
}

const TypeTraits& traits(GgmlType t) {
    const TypeTraits* tr = find_type(static_cast<std::uint32_t>(t));
    // Every enumerator has an entry; a cast from an unchecked integer is a programming error.
    return tr ? *tr : kTable[0];
}

std::optional<GgmlType> type_from_name(std::string_view name) {
    const std::string n = core::ascii_lower(name);
    for (const auto& tr : kTable) {
        if (tr.block_size != 0 && core::ascii_lower(tr.name) == n) return tr.type;
    }
    for (const auto& ft : kFileTypes) {
        if (ft.name == n) return ft.type;
    }
    return std::nullopt;
}

std::optional<std::uint64_t> bytes_for(GgmlType t, std::uint64_t n_elements) {
    const TypeTraits* tr = find_type(static_cast<std::uint32_t>(t));
    if (!tr || n_elements % tr->block_size != 0) return std::nullopt;
    const std::uint64_t blocks = n_elements / tr->block_size;
    if (blocks > std::numeric_limits<std::uint64_t>::max() / tr->type_size) return std::nullopt;
    return blocks * tr->type_size;
}

}  // namespace loch::gguf
