// gguf/whisper_file — whisper.cpp's own model format (the legacy ggml container, not GGUF): magic "ggml",
// eleven int32 hyper-parameters, the mel filter bank, the vocabulary, then tensors (n_dims, name length,
// type, dims, name, data) until the end of the file. whisper.cpp reads exactly this (src/whisper.cpp,
// whisper_model_load); `ggml-base.bin` and friends are such files.
//
// Reading: everything is outside input — counts, lengths and dims are bounds- and overflow-checked, so a
// hostile file cannot make the reader allocate more than a small multiple of its size (fuzzed:
// fuzz/fuzz_whisper_file.cpp). Writing (loch-synth): the tensors whisper.cpp creates for a shape, in its
// order and types, with their data left as sparse holes of zeros.
#pragma once

#include <cstdint>
#include <filesystem>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "gguf/ggml_types.hpp"

namespace loch::gguf {

struct WhisperHparams {
    std::int32_t n_vocab = 51865;
    std::int32_t n_audio_ctx = 1500;  // encoder frames per 30 s window
    std::int32_t n_audio_state = 384;
    std::int32_t n_audio_head = 6;
    std::int32_t n_audio_layer = 4;
    std::int32_t n_text_ctx = 448;  // decoder tokens
    std::int32_t n_text_state = 384;
    std::int32_t n_text_head = 6;
    std::int32_t n_text_layer = 4;
    std::int32_t n_mels = 80;
    std::int32_t ftype = 1;  // ggml_ftype (+ 1000 × quantization version)
};

struct WhisperTensor {
    std::string name;
    GgmlType type = GgmlType::F32;
    std::vector<std::int64_t> ne;  // ggml order: ne[0] is the row
    std::uint64_t bytes = 0;
    std::uint64_t data_offset = 0;  // in the file (reading only)
};

struct WhisperFile {
    std::string name;  // for messages
    WhisperHparams hp;
    std::uint32_t mel_filters = 0;  // n_mel of the filter bank
    std::uint32_t fft_bins = 0;
    std::uint32_t vocab_tokens = 0;      // tokens written; whisper.cpp adds the rest up to n_vocab
    std::vector<WhisperTensor> tensors;  // empty: whisper.cpp's "empty model for testing" (weights unset)
    std::uint64_t file_size = 0;
};

// The main weights' type for an ftype (ggml_ftype_to_ggml_type); nullopt for one whisper.cpp refuses.
std::optional<GgmlType> whisper_weight_type(std::int32_t ftype);
// The ftype that stores the main weights as `t`; nullopt for a type no ftype names.
std::optional<std::int32_t> whisper_ftype_of(GgmlType t);
// "tiny", "base", "small", "medium", "large" (by encoder depth, as whisper.cpp names them), else "unknown".
std::string_view whisper_size_name(const WhisperHparams& hp);
bool whisper_multilingual(const WhisperHparams& hp);  // n_vocab ≥ 51865

// The tensors whisper.cpp allocates for these hyper-parameters (names, types, dims, bytes), in its order.
// Throws std::invalid_argument for an ftype it refuses or a shape whose rows do not fit the type's blocks.
std::vector<WhisperTensor> whisper_tensors(const WhisperHparams& hp);

// Throws FormatError (gguf/reader.hpp) naming the byte offset. The fuzzer's entry point.
WhisperFile parse_whisper(std::span<const std::byte> bytes, std::string_view name = "<memory>");
WhisperFile read_whisper(const std::filesystem::path& path);
// Whether the bytes start like one (the magic, read little-endian as whisper.cpp does).
bool is_whisper_file(std::span<const std::byte> head);

// Writes a file whisper.cpp loads: the hyper-parameters, an all-zero filter bank (n_mels × 201), 50257
// placeholder text tokens (whisper.cpp names the special ones itself), and every tensor with its data a
// sparse hole of zeros; `with_tensors` false writes no tensors (whisper.cpp then allocates its weights
// without reading any). Returns the file size. Throws std::system_error naming the path.
std::uint64_t write_whisper(const std::filesystem::path& path, const WhisperHparams& hp,
                            bool with_tensors = true);
// The same in memory, tensor data included as zeros (tests and fuzz seeds: small shapes only).
std::vector<std::byte> serialize_whisper(const WhisperHparams& hp, bool with_tensors = true);

}  // namespace loch::gguf
