// plan/draft — speculative decoding with a draft model on a llama-server model (`args.draft`, the engine's
// --spec-type draft-simple --spec-draft-model), from the pinned source. Pure: no engine, no config.
//
// What the pinned llama.cpp does (common/speculative.cpp, tools/server/server-context.cpp):
//   - the draft is a second model in the same process with a context of its own, made from the target's
//     parameters (common_base_params_to_speculative): the same devices and tensor split, flash attention,
//     batch and ubatch, slots and KV layout (unified or per slot, --swa-full), and n_ctx = the target
//     context's padded size (llama_n_ctx(ctx_tgt)); its own -ngl (--spec-draft-ngl) and KV types
//     (--spec-draft-type-k/-v, default f16 whatever the target's); none of the target's tensor overrides
//     (-ot, --n-cpu-moe), LoRA or embedding mode; at most one output per slot (n_outputs_max = slots).
//   - the target verifies up to n_max drafted tokens per slot per step: its outputs grow to
//     min(n_batch, slots x (1 + n_max)) (common_speculative_get_output_limits) — logits rows in the graph
//     and in the host output buffer.
//   - the draft context is another ggml backend instance: on a GPU its own memory pool (the runtime growth
//     plan.hpp sizes from its graph) and cuBLAS use; the CUDA context is the process's, counted once.
//   - draft-simple keeps one top-k sampler per slot on the host, each with the vocabulary's candidates.
// What the engine refuses, check_draft() refuses first: a file it would load as another speculative type
// (an MTP head, EAGLE3, DFlash/DSpark, a Gemma 4 assistant need the target's context: loch does not plan
// them) and a vocabulary common_speculative_are_compatible rejects.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>

#include "gguf/ggml_types.hpp"
#include "gguf/model.hpp"

namespace loch::plan {

// The draft's defaults are the engine's (common.h common_params_speculative_draft).
inline constexpr std::uint32_t kDraftMaxDefault = 3;

struct DraftModel {
    std::string path;                          // as the engine opens it (--spec-draft-model)
    std::shared_ptr<const gguf::Model> model;  // its header (gguf::for_planning)
    std::uint32_t n_max = kDraftMaxDefault;    // --spec-draft-n-max: tokens drafted per slot per step
    int n_gpu_layers = -1;                     // --spec-draft-ngl; negative: all layers where the target runs
    gguf::GgmlType type_k = gguf::GgmlType::F16;  // --spec-draft-type-k
    gguf::GgmlType type_v = gguf::GgmlType::F16;  // --spec-draft-type-v
};

// nullopt when the pinned engine would run `draft` as a draft-simple draft of `target`; else why not, in
// the engine's terms. Both headers must still hold their tokenizer arrays (gguf::read_model, not
// for_planning): the vocabularies are compared token by token as the engine does.
std::optional<std::string> draft_refusal(const gguf::Model& draft, const gguf::Model& target);

// Reads the draft model file at `path` for `target` (whose header must still hold its vocabulary): throws
// std::runtime_error with the engine's reason for a draft it would refuse (draft_refusal) or an architecture
// the planner does not know; returns it with its header for the planner (gguf::for_planning).
DraftModel read_draft(const std::string& path, const gguf::Model& target, std::uint32_t n_max);

// The target's outputs per step with speculative decoding: min(n_batch, slots x (1 + n_max)).
std::uint32_t verify_outputs(std::uint32_t n_batch, std::uint32_t n_parallel, std::uint32_t n_max);

// Host bytes of draft-simple's per-slot samplers: a top-k sampler over the whole vocabulary each
// (llama_token_data: id, logit, p — 12 bytes a candidate).
std::uint64_t draft_sampler_bytes(std::uint64_t n_vocab, std::uint32_t n_parallel);

}  // namespace loch::plan
