// gguf/summary — what `loch inspect` shows about a model: shape, size, per-type bytes, attention layout.
//
// Read from the metadata llama.cpp uses (`<arch>.block_count`, `<arch>.attention.head_count_kv`, ...).
// Values that llama.cpp allows per layer (head counts, FFN size) keep their per-layer form. Where the file
// carries no sliding-window pattern, the pinned llama.cpp's built-in default for the architecture is used
// and named as such.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "gguf/model.hpp"

namespace loch::gguf {

// A hyperparameter that is either one value for all layers (size 1) or one value per layer.
struct LayerValue {
    std::vector<std::uint64_t> values;

    bool present() const { return !values.empty(); }
    bool uniform() const;
    std::uint64_t max() const;  // 0 when absent
};

struct TypeUsage {
    GgmlType type = GgmlType::F32;
    std::uint64_t tensors = 0;
    std::uint64_t elements = 0;
    std::uint64_t bytes = 0;
};

struct Summary {
    std::vector<std::string> files;
    std::uint32_t version = 3;
    std::uint64_t file_size = 0;
    std::string architecture;
    std::string name;       // general.name
    std::string file_type;  // general.file_type as llama.cpp names it ("Q4_K_M"), "" when absent
    std::uint64_t parameter_count = 0;
    std::uint64_t tensor_count = 0;
    std::uint64_t tensor_bytes = 0;
    std::vector<TypeUsage> types;  // most bytes first

    std::optional<std::uint64_t> layer_count;
    std::optional<std::uint64_t> context_length;
    std::optional<std::uint64_t> embedding_length;
    LayerValue head_count;
    LayerValue head_count_kv;
    std::optional<std::uint64_t> key_length;    // per head; embedding / heads when not in the file
    std::optional<std::uint64_t> value_length;  // per head; as key_length
    LayerValue feed_forward_length;

    std::optional<std::uint64_t> expert_count;
    std::optional<std::uint64_t> expert_used_count;
    std::optional<std::uint64_t> expert_shared_count;
    std::optional<std::uint64_t> expert_feed_forward_length;

    std::optional<std::uint64_t> sliding_window;
    std::vector<bool> swa_layers;    // per layer: true = sliding-window attention
    std::string swa_pattern_source;  // "metadata", "llama.cpp default for <arch>", "" when no SWA

    std::optional<std::uint64_t> kv_lora_rank;  // MLA
    std::optional<std::uint64_t> q_lora_rank;
    std::optional<std::uint64_t> key_length_mla;
    std::optional<std::uint64_t> value_length_mla;

    std::string tokenizer_model;  // tokenizer.ggml.model: "gpt2", "llama", ...
    std::string tokenizer_pre;    // tokenizer.ggml.pre
    std::optional<std::uint64_t> vocab_size;
};

Summary summarize(const Model& model);
nlohmann::json to_json(const Summary& s);
std::string to_text(const Summary& s);

// llama.cpp's name for a general.file_type value (LLAMA_FTYPE_*): 15 → "Q4_K_M"; "" when unknown.
std::string file_type_name(std::uint64_t ftype);
// "8.03 B", "494 M", "12.3 K".
std::string format_count(std::uint64_t n);
// "4.58 GiB", "512 MiB", "100 B".
std::string format_bytes(std::uint64_t n);

}  // namespace loch::gguf
