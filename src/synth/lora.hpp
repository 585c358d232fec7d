// synth/lora — synthetic LoRA adapters for a model file, as llama.cpp's convert_lora_to_gguf.py writes them
// and src/llama-adapter.cpp loads them (general.type "adapter", adapter.type "lora", adapter.lora.alpha,
// pairs `<tensor>.lora_a` [in, rank] and `<tensor>.lora_b` [rank, out]; token_embd's pair flipped), zero
// weights (a sparse file: B = 0 is how LoRA training starts, so the model's answers do not change).
//   loch-synth --lora-of model.gguf --rank 16 [--lora-targets attn_q,attn_v,ffn_up] [--type f16] --out a.gguf
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "gguf/model.hpp"

namespace loch::synth {

// What every layer's attention and FFN projections, the output head and the token embedding are called.
const std::vector<std::string>& lora_target_names();

// An adapter of `rank` for `base`: a pair for each 2-D weight `blk.N.<target>.weight` (and `output.weight`,
// `token_embd.weight` when named). Throws SynthError for an unknown target, a rank of 0, a target the model
// lacks, or rows a quantized `type` cannot hold in whole blocks.
gguf::Model build_lora(const gguf::Model& base, std::uint32_t rank, const std::vector<std::string>& targets,
                       gguf::GgmlType type = gguf::GgmlType::F16);

}  // namespace loch::synth
