// The vocabulary: llama.cpp requires unique token strings (it asserts id_to_token.size() ==
// token_to_id.size()), byte tokens spelled <0xXX> for SPM byte fallback and the newline token, and a
// token count equal to the embedding rows. Printable ASCII characters come first so that prompts tokenize
// to characters, then "▁"-prefixed and bare letter strings (a, b, …, z, aa, ab, …) fill the rest.
#include <string>
#include <vector>

#include <fmt/format.h>

#include "synth/vocab.hpp"

namespace loch::synth::detail {

namespace {

// llama_token_type of llama.h.
constexpr std::int64_t kNormal = 1, kUnknown = 2, kControl = 3, kByte = 6;

// Bijective base-26: 0 → "a", 25 → "z", 26 → "aa", …
std::string letters(std::uint64_t n) {
    std::string s;
    ++n;
    while (n > 0) {
        --n;
        s.insert(s.begin(), static_cast<char>('a' + n % 26));
        n /= 26;
    }
    return s;
}

}  // namespace

void add_vocab(gguf::Metadata& md, std::uint32_t n_vocab) {
    std::vector<gguf::Value> tokens, scores, types;
    tokens.reserve(n_vocab);
    scores.reserve(n_vocab);
    types.reserve(n_vocab);
    auto add = [&](std::string text, float score, std::int64_t type) {
        tokens.push_back(gguf::Value::str(std::move(text)));
        scores.push_back(gguf::Value::f32(score));
        types.push_back(gguf::Value::i32(static_cast<std::int32_t>(type)));
    };
    add("<unk>", 0.0f, kUnknown);
    add("<s>", 0.0f, kControl);
    add("</s>", 0.0f, kControl);
    for (int b = 0; b < 256 && tokens.size() < n_vocab; ++b) add(fmt::format("<0x{:02X}>", b), 0.0f, kByte);
    // Pieces: printable ASCII (space spelled "▁" as SentencePiece does), then letter strings.
    for (int ch = 0x20; ch < 0x7f && tokens.size() < n_vocab; ++ch) {
        add(ch == ' ' ? std::string("\xE2\x96\x81") : std::string(1, static_cast<char>(ch)),
            -static_cast<float>(tokens.size()), kNormal);
    }
    for (std::uint64_t k = 0; tokens.size() < n_vocab; ++k) {
        std::string piece = letters(k / 2);
        if (k % 2 == 0) {
            piece = "\xE2\x96\x81" + piece;
        } else if (piece.size() == 1) {
            continue;  // single letters were added with the printable characters
        }
        add(std::move(piece), -static_cast<float>(tokens.size()), kNormal);
    }

    md.set("tokenizer.ggml.model", gguf::Value::str("llama"));
    md.set("tokenizer.ggml.tokens", gguf::Value::array(gguf::ValueType::STRING, std::move(tokens)));
    md.set("tokenizer.ggml.scores", gguf::Value::array(gguf::ValueType::FLOAT32, std::move(scores)));
    md.set("tokenizer.ggml.token_type", gguf::Value::array(gguf::ValueType::INT32, std::move(types)));
    md.set("tokenizer.ggml.bos_token_id", gguf::Value::u32(1));
    md.set("tokenizer.ggml.eos_token_id", gguf::Value::u32(2));
    md.set("tokenizer.ggml.unknown_token_id", gguf::Value::u32(0));
    md.set("tokenizer.ggml.add_bos_token", gguf::Value::boolean(true));
    md.set("tokenizer.ggml.add_eos_token", gguf::Value::boolean(false));
}

}  // namespace loch::synth::detail
