#include "plan/lora.hpp"

#include <algorithm>
#include <map>
#include <stdexcept>

#include <fmt/format.h>

namespace loch::plan {

namespace {

constexpr std::string_view kA = ".lora_a", kB = ".lora_b";

bool ends_with(std::string_view s, std::string_view suffix) {
    return s.ends_with(suffix);
}

std::uint64_t dim(const gguf::TensorInfo& t, std::size_t i) {
    return i < t.dims.size() ? t.dims[i] : 1;
}

bool is_token_embd(std::string_view base) {
    return base.ends_with("token_embd.weight");
}

std::uint64_t tokens_of(const LoraPair& p, std::uint32_t n_ubatch, std::uint32_t n_outputs) {
    return p.base == "output.weight" ? std::max<std::uint32_t>(n_outputs, 1) : n_ubatch;
}

}  // namespace

// token_embd's pair is flipped (llama-adapter.cpp: "A and B are flipped"): A is [rank, vocab], B [rank,
// width].
std::uint64_t LoraPair::rank() const {
    return is_token_embd(base) ? dim(a, 0) : dim(a, 1);
}
std::uint64_t LoraPair::width_in() const {
    return is_token_embd(base) ? rank() : dim(a, 0);
}
std::uint64_t LoraPair::width_out() const {
    return dim(b, 1);
}
bool LoraPair::quantized() const {
    return gguf::traits(a.type).quantized && gguf::traits(b.type).quantized;
}

std::uint64_t LoraAdapter::bytes() const {
    std::uint64_t n = 0;
    for (const auto& p : pairs) n += p.a.n_bytes() + p.b.n_bytes();
    return n;
}

LoraAdapter read_lora(const gguf::Model& adapter, const gguf::Model& model) {
    const auto& kv = adapter.metadata;
    if (const auto t = kv.get_string("general.type").value_or(""); t != "adapter")
        throw std::runtime_error(fmt::format("general.type is '{}', not 'adapter': not a LoRA adapter", t));
    if (const auto t = kv.get_string("adapter.type").value_or(""); t != "lora")
        throw std::runtime_error(fmt::format("adapter.type is '{}', not 'lora'", t));
    if (adapter.architecture() != model.architecture())
        throw std::runtime_error(fmt::format("the adapter is for architecture '{}', the model is '{}'",
                                             adapter.architecture(), model.architecture()));
    LoraAdapter out;
    out.alpha = static_cast<float>(kv.get_float("adapter.lora.alpha").value_or(0.0));
    struct Halves {
        const gguf::TensorInfo *a = nullptr, *b = nullptr;
    };
    std::map<std::string, Halves> halves;
    for (const auto& t : adapter.tensors) {
        if (ends_with(t.name, kA)) {
            halves[t.name.substr(0, t.name.size() - kA.size())].a = &t;
        } else if (ends_with(t.name, kB)) {
            halves[t.name.substr(0, t.name.size() - kB.size())].b = &t;
        } else if (!ends_with(t.name, "_norm.weight")) {  // skipped by the loader too
            throw std::runtime_error(
                fmt::format("tensor '{}' has an unexpected suffix (not .lora_a or .lora_b)", t.name));
        }
    }
    for (const auto& [base, h] : halves) {
        if (!h.a || !h.b)
            throw std::runtime_error(
                fmt::format("the pair for '{}' lacks its {}", base, h.a ? "lora_b" : "lora_a"));
        const auto* w = model.find_tensor(base);
        if (!w)
            throw std::runtime_error(
                fmt::format("'{}' is not a tensor of the model (another base model?)", base));
        const bool ok = is_token_embd(base) ? dim(*w, 0) == dim(*h.b, 1) && dim(*w, 1) == dim(*h.a, 1)
                                            : dim(*w, 0) == dim(*h.a, 0) && dim(*w, 1) == dim(*h.b, 1) &&
                                                  dim(*h.a, 1) == dim(*h.b, 0);
        if (!ok)
            throw std::runtime_error(
                fmt::format("'{}' is {}x{} but its pair is A {}x{}, B {}x{} (another base model?)", base,
                            dim(*w, 0), dim(*w, 1), dim(*h.a, 0), dim(*h.a, 1), dim(*h.b, 0), dim(*h.b, 1)));
        out.pairs.push_back({base, *h.a, *h.b});
    }
    if (out.pairs.empty()) throw std::runtime_error("the adapter has no lora_a / lora_b pairs");
    return out;
}

std::uint64_t lora_compute_bytes(const std::vector<LoraPair>& pairs, std::uint32_t n_ubatch,
                                 std::uint32_t n_outputs) {
    std::uint64_t most = 0;
    for (const auto& p : pairs) {
        const std::uint64_t tokens = tokens_of(p, n_ubatch, n_outputs);
        most = std::max(most, (p.width_out() + p.rank()) * tokens * 4);
    }
    return most;
}

std::uint64_t lora_gpu_pool_bytes(const std::vector<LoraPair>& pairs, std::uint32_t n_ubatch,
                                  std::uint32_t n_outputs) {
    std::uint64_t most = 0;
    for (const auto& p : pairs) {
        if (p.quantized()) continue;
        const std::uint64_t tokens = tokens_of(p, n_ubatch, n_outputs);
        most = std::max(most, (std::max(p.width_in(), p.width_out()) + p.rank()) * tokens * 2);
    }
    return most;
}

}  // namespace loch::plan
