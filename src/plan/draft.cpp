#include "plan/draft.hpp"

#include <algorithm>

#include <stdexcept>

#include <fmt/format.h>

#include "gguf/reader.hpp"
#include "plan/shape.hpp"

namespace loch::plan {
namespace {

// common/speculative.cpp
constexpr std::uint64_t kVocabMaxSizeDifference = 128;  // SPEC_VOCAB_MAX_SIZE_DIFFERENCE
constexpr std::size_t kVocabCheckStart = 5;             // SPEC_VOCAB_CHECK_START_TOKEN_ID

const gguf::Array* tokens_of(const gguf::Model& m) {
    const auto* v = m.metadata.find("tokenizer.ggml.tokens");
    return v ? v->as_array() : nullptr;
}

std::optional<bool> flag(const gguf::Model& m, std::string_view key) {
    const auto* v = m.metadata.find(key);
    if (!v) return std::nullopt;
    if (const auto* b = std::get_if<bool>(&v->data)) return *b;
    return std::nullopt;
}

// The engine compares the special token only where it is added; a key absent from either file is left to
// the engine (its default depends on the tokenizer's pre-type table, which loch does not copy).
std::optional<std::string> special_token_mismatch(const gguf::Model& draft, const gguf::Model& target,
                                                  std::string_view which) {
    const auto add_d = flag(draft, fmt::format("tokenizer.ggml.add_{}_token", which));
    const auto add_t = flag(target, fmt::format("tokenizer.ggml.add_{}_token", which));
    if (add_d && add_t && *add_d != *add_t)
        return fmt::format("the draft {} a {} token and the model {}", *add_d ? "adds" : "does not add",
                           which, *add_t ? "does" : "does not");
    if (!(add_d.value_or(false) && add_t.value_or(false))) return std::nullopt;
    const auto id_d = draft.metadata.get_uint(fmt::format("tokenizer.ggml.{}_token_id", which));
    const auto id_t = target.metadata.get_uint(fmt::format("tokenizer.ggml.{}_token_id", which));
    if (id_d && id_t && *id_d != *id_t)
        return fmt::format("the draft's {} token is {} and the model's {}", which, *id_d, *id_t);
    return std::nullopt;
}

}  // namespace

std::optional<std::string> draft_refusal(const gguf::Model& draft, const gguf::Model& target) {
    const std::string arch = draft.architecture();
    // Speculative types whose draft runs on the target's context or hidden states (llama-context.cpp:
    // ctx_other; common_speculative_types_from_gguf): not a draft-simple model.
    if (arch == "eagle3" || arch == "dflash" || arch == "gemma4-assistant")
        return fmt::format(
            "'{}' is a {} head that runs on the model's own context (--spec-type {}), which "
            "loch does not plan; use a small model of the same family as the draft",
            arch, arch == "gemma4-assistant" ? "Gemma 4 assistant" : arch,
            arch == "gemma4-assistant" ? "draft-mtp" : "draft-" + arch);
    if (const auto n = draft.arch_uint("block_count"); n && *n > 0) {
        if (draft.find_tensor(fmt::format("blk.{}.nextn.eh_proj.weight", *n - 1)))
            return "the file carries multi-token-prediction (MTP) layers: the engine would run it as an MTP "
                   "draft (--spec-type draft-mtp), which loch does not plan; use a small model of the same "
                   "family as the draft";
    }
    // common_speculative_are_compatible, in its order.
    const auto type_d = draft.metadata.get_string("tokenizer.ggml.model");
    const auto type_t = target.metadata.get_string("tokenizer.ggml.model");
    if (type_d != type_t)
        return fmt::format(
            "its tokenizer is '{}' and the model's '{}': the engine refuses a draft whose "
            "vocabulary type differs",
            type_d.value_or("none"), type_t.value_or("none"));
    for (const char* which : {"bos", "eos"})
        if (auto m = special_token_mismatch(draft, target, which))
            return *m + ": the engine refuses it as a draft";
    const auto* tok_d = tokens_of(draft);
    const auto* tok_t = tokens_of(target);
    if (!tok_d || !tok_t)
        return "a vocabulary (tokenizer.ggml.tokens) is missing: the engine cannot compare them";
    const std::uint64_t n_d = tok_d->items.size(), n_t = tok_t->items.size();
    if ((n_d > n_t ? n_d - n_t : n_t - n_d) > kVocabMaxSizeDifference)
        return fmt::format(
            "its vocabulary has {} tokens and the model's {}: the engine takes a draft whose "
            "vocabulary differs by at most {}",
            n_d, n_t, kVocabMaxSizeDifference);
    for (std::size_t i = kVocabCheckStart; i < std::min(n_d, n_t); ++i) {
        const auto* a = tok_d->items[i].as_string();
        const auto* b = tok_t->items[i].as_string();
        if (!a || !b || *a != *b)
            return fmt::format(
                "token {} differs ('{}' in the draft, '{}' in the model): the engine takes "
                "only a draft with the model's vocabulary",
                i, a ? *a : "?", b ? *b : "?");
    }
    return std::nullopt;
}

DraftModel read_draft(const std::string& path, const gguf::Model& target, std::uint32_t n_max) {
    gguf::Model draft = gguf::read_model(path);
    if (auto why = draft_refusal(draft, target)) throw std::runtime_error(*why);
    (void)shape_of(draft);  // an architecture the planner knows, or why not
    return DraftModel{path, std::make_shared<const gguf::Model>(gguf::for_planning(std::move(draft))), n_max};
}

std::uint32_t verify_outputs(std::uint32_t n_batch, std::uint32_t n_parallel, std::uint32_t n_max) {
    const std::uint64_t total = std::uint64_t{n_parallel} * (1 + std::uint64_t{n_max});
    return static_cast<std::uint32_t>(std::max<std::uint64_t>(1, std::min<std::uint64_t>(n_batch, total)));
}

std::uint64_t draft_sampler_bytes(std::uint64_t n_vocab, std::uint32_t n_parallel) {
    return n_vocab * 12 * n_parallel;
}

}  // namespace loch::plan
