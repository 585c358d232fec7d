// synth/quant_rules — which ggml type each tensor gets for a quantization name, following llama-quant.cpp
// of the pinned llama.cpp so that synthetic files have the same per-type byte mix as real quantized files.
#pragma once

#include <cstdint>
#include <optional>
#include <string_view>
#include <vector>

#include "gguf/ggml_types.hpp"
#include "gguf/model.hpp"
#include "synth/synth.hpp"

namespace loch::synth::detail {

struct QuantSpec {
    std::uint32_t file_type = 1;  // general.file_type (llama_ftype)
    gguf::GgmlType base = gguf::GgmlType::F16;
    bool pure = false;  // a plain tensor type: no mixing rules, only the block-size fallback
};

// nullopt for unknown names.
std::optional<QuantSpec> parse_quant(std::string_view name);

// Sets tensors[i].type for every tensor; quantizable[i] tells whether llama-quantize would touch it
// (2-D/3-D weights other than norms and the expert router); the others stay F32.
void assign_types(std::vector<gguf::TensorInfo>& tensors, const std::vector<bool>& quantizable,
                  const Shape& shape, const QuantSpec& spec);

}  // namespace loch::synth::detail
