// synth/vocab — a small SentencePiece ("llama") vocabulary of any size that llama.cpp accepts: <unk>, <s>,
// </s>, the 256 byte tokens <0x00>..<0xFF> (byte fallback tokenizes any input) and generated pieces.
#pragma once

#include <cstdint>

#include "gguf/model.hpp"

namespace loch::synth::detail {

// Adds tokenizer.ggml.* keys for n_vocab tokens (n_vocab >= 259).
void add_vocab(gguf::Metadata& md, std::uint32_t n_vocab);

}  // namespace loch::synth::detail
