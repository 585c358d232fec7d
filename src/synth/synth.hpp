// synth — synthetic GGUF models with real architectures (loch-synth, tests, benchmarks, the planner).
//
// Memory behaviour depends on shapes, not on weight values, so a model is described by its Shape (the
// hyper-parameters llama.cpp reads) and a quantization; build_model() turns it into a gguf::Model with
// exactly the tensor names, shapes and metadata keys the pinned llama.cpp (de3ff81) loads, plus a small
// SentencePiece ("llama") vocabulary that tokenizes any ASCII prompt. No tensor data is held: write_model()
// streams generated weights (zeros or small deterministic values, never NaN/Inf) or leaves a sparse hole.
//
// Presets carry the real shapes of popular models so that the planner can plan without a file and
// `loch inspect` of a written preset reports the real parameter count.
#pragma once

#include <cstdint>
#include <filesystem>
#include <stdexcept>
#include <string>
#include <string_view>
#include <vector>

#include "gguf/model.hpp"

namespace loch::synth {

// Bad shapes, unknown names and impossible combinations; the message names the field and the numbers.
class SynthError : public std::runtime_error {
  public:
    using std::runtime_error::runtime_error;
};

// Architectures build_model() knows, as general.architecture spells them:
// "llama" (also Mistral and, with experts, Mixtral), "qwen2", "qwen3", "qwen3moe", "gemma3", "deepseek2".
const std::vector<std::string>& architectures();

struct Shape {
    std::string arch = "llama";
    std::string name;  // general.name; empty ⇒ "synth-<arch>"
    std::uint32_t n_layer = 0;
    std::uint32_t n_embd = 0;
    std::uint32_t n_head = 0;
    // KV heads: empty ⇒ n_head; one value ⇒ every layer; n_layer values ⇒ per layer (written as an array;
    // the pinned llama.cpp loads such arrays for these architectures only when all values are equal).
    std::vector<std::uint32_t> n_head_kv;
    std::uint32_t head_dim = 0;  // 0 ⇒ n_embd / n_head. For deepseek2: the K head size (qk_nope + qk_rope).
    std::uint32_t n_ff = 0;      // dense FFN width (deepseek2: the leading dense layers)
    std::uint32_t n_vocab = 0;
    std::uint32_t n_ctx_train = 0;

    // Mixture of experts (llama/Mixtral, qwen3moe, deepseek2).
    std::uint32_t n_expert = 0;
    std::uint32_t n_expert_used = 0;
    std::uint32_t n_ff_expert = 0;         // 0 ⇒ n_ff
    std::uint32_t n_expert_shared = 0;     // deepseek2 shared experts (each n_ff_expert wide)
    std::uint32_t n_layer_dense_lead = 0;  // deepseek2: leading layers with a dense FFN

    // Sliding-window attention (gemma3): every swa_pattern-th layer is global, the others see the window.
    std::uint32_t sliding_window = 0;
    std::uint32_t swa_pattern = 0;
    float rope_freq_base_swa = 10000.0f;

    // Multi-head latent attention (deepseek2).
    std::uint32_t q_lora_rank = 0;  // 0 ⇒ plain wq (DeepSeek-V2-Lite)
    std::uint32_t kv_lora_rank = 0;
    std::uint32_t rope_dim = 0;    // qk_rope_head_dim; 0 ⇒ head_dim (non-MLA)
    std::uint32_t v_head_dim = 0;  // deepseek2 value head size; 0 ⇒ head_dim

    float rope_freq_base = 10000.0f;
    float norm_eps = 1e-5f;
    bool tied_embeddings = false;  // no output.weight: the token embedding is reused
    bool attn_bias = false;        // q/k/v biases (qwen2)

    std::uint32_t head_dim_or_default() const { return head_dim ? head_dim : (n_head ? n_embd / n_head : 0); }
    std::uint32_t n_ff_expert_or_default() const { return n_ff_expert ? n_ff_expert : n_ff; }
    std::uint32_t kv_heads(std::uint32_t layer) const;  // resolves the n_head_kv forms above
};

// Throws SynthError on the first problem, e.g. "n_embd 1000 is not divisible by n_head 3".
void validate(const Shape& shape);

// Quantizations: llama.cpp file types ("f32", "f16", "bf16", "q8_0", "q4_0", "q4_1", "q5_0", "q5_1",
// "q2_k", "q3_k_s", "q3_k_m", "q3_k_l", "q4_k_s", "q4_k_m", "q5_k_s", "q5_k_m", "q6_k") pick tensor types
// with llama.cpp's own mixing rules (llama-quant.cpp: output Q6_K, some attn_v/ffn_down with more bits,
// norms and router F32, fallback when a row is not a multiple of the block size). A plain tensor type
// name ("q4_k", "q5_k", "q3_k", "q2_k" — those that are not file types) means every quantizable tensor of
// that type (llama-quantize --pure). Case-insensitive.
const std::vector<std::string>& quant_names();
bool is_known_quant(std::string_view quant);

// The model without data (tensor offsets assigned as the writer will lay them out).
// Throws SynthError for an invalid shape or unknown quant.
gguf::Model build_model(const Shape& shape, std::string_view quant = "f16");
// Assigns the tensors' offsets and the file size as the writer lays them out. Throws SynthError.
void lay_out(gguf::Model& model);

enum class Weights {
    zeros,  // sparse file: only the header costs disk space
    small,  // small deterministic values from a fixed-seed hash of (tensor, position)
    // `small`, and a model that answers briefly: every token's embedding has one large component, which the
    // output layer reads as "▁hi" (logit L + 1) or end of text (L); sampled at temperature 0.8–1 an answer
    // ends after ~3 tokens (an agent's turn completes), greedy decoding never ends ("hi hi hi …", the
    // suites' long streams). The demo's default. Needs token_embd, output_norm and output of f32, f16 or
    // q8_0 and a vocabulary with "▁hi".
    brief,
};
Weights parse_weights(std::string_view s);  // "zeros" | "small" | "brief"; throws SynthError
// Presets above 1 GB default to zeros, smaller models to small values; the demo preset (`preset`) to
// brief where its shape still allows it.
Weights default_weights(const gguf::Model& model, std::string_view preset = {});

// Writes the GGUF file (same arguments ⇒ same bytes) and returns its size in bytes.
std::uint64_t write_model(const std::filesystem::path& path, const gguf::Model& model, Weights weights);

struct Preset {
    std::string name;         // "llama-3.1-8b"
    std::string description;  // "Meta Llama 3.1 8B"
    std::string source;       // where the shape comes from (config.json of the HF repo)
    Shape shape;
    std::uint64_t published_params = 0;  // the real model's parameter count (text model), 0 for synthetic
    std::string default_quant;           // "q4_k_m" for real models, smaller types for tiny ones
};

const std::vector<Preset>& list_presets();
const Preset* find_preset(std::string_view name);  // nullptr when unknown

}  // namespace loch::synth
