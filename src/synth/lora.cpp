#include "synth/lora.hpp"

#include <algorithm>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "synth/synth.hpp"

namespace loch::synth {

const std::vector<std::string>& lora_target_names() {
    static const std::vector<std::string> names = {"attn_q", "attn_k",   "attn_v", "attn_output", "ffn_gate",
                                                   "ffn_up", "ffn_down", "output", "token_embd"};
    return names;
}

namespace {

// "blk.7.attn_q.weight" → "attn_q"; "output.weight" → "output"; "" for anything else.
std::string target_of(const std::string& name) {
    constexpr std::string_view kWeight = ".weight";
    if (!name.ends_with(kWeight)) return "";
    std::string stem = name.substr(0, name.size() - kWeight.size());
    if (stem.starts_with("blk.")) {
        const auto dot = stem.find('.', 4);
        return dot == std::string::npos ? "" : stem.substr(dot + 1);
    }
    return stem;
}

void check_rows(const gguf::TensorInfo& t, gguf::GgmlType type) {
    const auto block = gguf::traits(type).block_size;
    if (!t.dims.empty() && t.dims[0] % block != 0)
        throw SynthError(fmt::format("{}: rows of {} values are not whole {} blocks of {}; use f16 or f32",
                                     t.name, t.dims[0], gguf::traits(type).name, block));
}

}  // namespace

gguf::Model build_lora(const gguf::Model& base, std::uint32_t rank, const std::vector<std::string>& targets,
                       gguf::GgmlType type) {
    if (rank == 0) throw SynthError("--rank must be at least 1");
    const auto& known = lora_target_names();
    for (const auto& t : targets)
        if (std::find(known.begin(), known.end(), t) == known.end())
            throw SynthError(fmt::format("unknown LoRA target '{}' (one of: {})", t, fmt::join(known, ", ")));

    gguf::Model m;
    auto& kv = m.metadata;
    kv.set("general.architecture", gguf::Value::str(base.architecture()));
    kv.set("general.type", gguf::Value::str("adapter"));
    kv.set("general.name", gguf::Value::str("synth-lora"));
    kv.set("adapter.type", gguf::Value::str("lora"));
    kv.set("adapter.lora.alpha", gguf::Value::f32(static_cast<float>(rank)));
    std::vector<std::string> found;
    for (const auto& w : base.tensors) {
        const std::string target = target_of(w.name);
        if (w.dims.size() != 2 || std::find(targets.begin(), targets.end(), target) == targets.end())
            continue;
        gguf::TensorInfo a, b;
        a.name = w.name + ".lora_a";
        b.name = w.name + ".lora_b";
        a.type = b.type = type;
        if (target == "token_embd") {  // flipped: A [rank, vocab], B [rank, width]
            a.dims = {rank, w.dims[1]};
            b.dims = {rank, w.dims[0]};
        } else {
            a.dims = {w.dims[0], rank};
            b.dims = {rank, w.dims[1]};
        }
        check_rows(a, type);
        check_rows(b, type);
        m.tensors.push_back(std::move(a));
        m.tensors.push_back(std::move(b));
        if (std::find(found.begin(), found.end(), target) == found.end()) found.push_back(target);
    }
    for (const auto& t : targets)
        if (std::find(found.begin(), found.end(), t) == found.end())
            throw SynthError(fmt::format("the model has no 2-D '{}' weights to adapt", t));
    return m;
}

}  // namespace loch::synth
