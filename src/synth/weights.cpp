// Weight data: zeros (a sparse hole, valid for every type) or small deterministic values. For quantized
// types random bytes are valid quants as long as the fp16 scales are finite, so each block gets random
// bytes with its scale fields (d, dmin/m) overwritten by a small constant: no NaN/Inf can arise.
#include <array>
#include <cmath>
#include <cstring>

#include <fmt/format.h>

#include "gguf/writer.hpp"
#include "synth/synth.hpp"

namespace loch::synth {

namespace {

using gguf::GgmlType;

constexpr std::uint64_t kSeed = 0x6c6f63682d73796eULL;  // "loch-syn"

std::uint64_t splitmix64(std::uint64_t x) {
    x += 0x9e3779b97f4a7c15ULL;
    x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ULL;
    x = (x ^ (x >> 27)) * 0x94d049bb133111ebULL;
    return x ^ (x >> 31);
}

std::uint64_t name_hash(const std::string& s) {
    std::uint64_t h = 1469598103934665603ULL;  // FNV-1a
    for (unsigned char c : s) h = (h ^ c) * 1099511628211ULL;
    return h;
}

// Byte positions of the fp16 scale fields inside one block (ggml-common.h); -1 ends the list.
struct ScaleFields {
    std::array<int, 2> pos{-1, -1};
    std::uint16_t value = 0;
};

ScaleFields scale_fields(GgmlType t) {
    constexpr std::uint16_t kSimple = 0x1400;  // 2^-10: int quants of |q| <= 127 stay below 0.13
    constexpr std::uint16_t kK = 0x0400;       // 2^-14: K-quant super-block scales (6-bit sub-scales on top)
    switch (t) {
        case GgmlType::Q4_0:
        case GgmlType::Q5_0:
        case GgmlType::Q8_0:
            return {{0, -1}, kSimple};
        case GgmlType::Q4_1:
        case GgmlType::Q5_1:
            return {{0, 2}, kSimple};
        case GgmlType::Q2_K:
            return {{80, 82}, kK};
        case GgmlType::Q3_K:
            return {{108, -1}, kK};
        case GgmlType::Q4_K:
        case GgmlType::Q5_K:
            return {{0, 2}, kK};
        case GgmlType::Q6_K:
            return {{208, -1}, kK};
        default:
            throw SynthError(fmt::format("no small-weight generator for type {}", gguf::traits(t).name));
    }
}

// Small finite floats 2^-10..2^-5 with random sign and mantissa, as raw bits.
std::uint32_t small_f32_bits(std::uint64_t r) {
    const std::uint32_t exp = 117 + static_cast<std::uint32_t>((r >> 8) % 6);
    return (static_cast<std::uint32_t>(r & 1) << 31) | (exp << 23) |
           static_cast<std::uint32_t>((r >> 16) & 0x7fffff);
}
std::uint16_t small_f16_bits(std::uint64_t r) {
    const std::uint32_t exp = 5 + static_cast<std::uint32_t>((r >> 8) % 6);
    return static_cast<std::uint16_t>(((r & 1) << 15) | (exp << 10) | ((r >> 16) & 0x3ff));
}
std::uint16_t small_bf16_bits(std::uint64_t r) {
    return static_cast<std::uint16_t>(small_f32_bits(r) >> 16);
}

void fill_small(const gguf::TensorInfo& t, std::uint64_t tensor_key, std::uint64_t offset,
                std::span<std::byte> out) {
    const auto& tr = gguf::traits(t.type);
    auto put = [&](std::size_t i, std::uint64_t v, unsigned nbytes) {
        for (unsigned b = 0; b < nbytes && i + b < out.size(); ++b) {
            out[i + b] = static_cast<std::byte>((v >> (8 * b)) & 0xff);
        }
    };
    if (!tr.quantized) {
        const unsigned es = tr.type_size;  // one element per "block" for float types
        std::size_t i = 0;
        // Start at the element containing `offset` (chunks are element-aligned in practice; be safe anyway).
        std::uint64_t elem = offset / es;
        unsigned skip = static_cast<unsigned>(offset % es);
        while (i < out.size()) {
            const std::uint64_t r = splitmix64(tensor_key ^ elem);
            std::uint64_t bits = 0;
            switch (t.type) {
                case GgmlType::F32:
                    bits = small_f32_bits(r);
                    break;
                case GgmlType::F16:
                    bits = small_f16_bits(r);
                    break;
                case GgmlType::BF16:
                    bits = small_bf16_bits(r);
                    break;
                default:
                    throw SynthError(fmt::format("no small-weight generator for type {}", tr.name));
            }
            for (unsigned b = skip; b < es && i < out.size(); ++b, ++i) {
                out[i] = static_cast<std::byte>((bits >> (8 * b)) & 0xff);
            }
            skip = 0;
            ++elem;
        }
        return;
    }
    const ScaleFields sf = scale_fields(t.type);
    const std::uint64_t bs = tr.type_size;
    for (std::size_t i = 0; i < out.size();) {
        const std::uint64_t pos = offset + i;
        const std::uint64_t word = pos / 8;
        const std::uint64_t r = splitmix64(tensor_key ^ word);
        const unsigned first = static_cast<unsigned>(pos % 8);
        const unsigned n = static_cast<unsigned>(std::min<std::uint64_t>(8 - first, out.size() - i));
        put(i, r >> (8 * first), n);
        i += n;
    }
    // Overwrite the scale fields of every block overlapping this chunk.
    const std::uint64_t end = offset + out.size();
    for (std::uint64_t block = offset / bs; block * bs < end; ++block) {
        for (int p : sf.pos) {
            if (p < 0) continue;
            for (int b = 0; b < 2; ++b) {
                const std::uint64_t at = block * bs + static_cast<std::uint64_t>(p + b);
                if (at >= offset && at < end)
                    out[at - offset] = static_cast<std::byte>((sf.value >> (8 * b)) & 0xff);
            }
        }
    }
}

// Weights::brief: one value written over a row's first element — and the rest of that first block zeroed,
// so that a quantized block's shared scale does not make its neighbours as large.
struct Planted {
    std::string tensor;
    std::int64_t row = -1;  // -1: every row
    float value = 0;
};

std::uint16_t f16_bits(float v) {
    const _Float16 h = static_cast<_Float16>(v);
    std::uint16_t bits = 0;
    std::memcpy(&bits, &h, sizeof bits);
    return bits;
}

// The first block (q8_0: 34 bytes; a float type: its first element) of each planted row, as bytes.
std::vector<std::byte> planted_block(GgmlType type, float value) {
    std::vector<std::byte> b;
    const auto put = [&](std::uint64_t v, unsigned n) {
        for (unsigned i = 0; i < n; ++i) b.push_back(static_cast<std::byte>((v >> (8 * i)) & 0xff));
    };
    switch (type) {
        case GgmlType::F32: {
            std::uint32_t bits = 0;
            std::memcpy(&bits, &value, sizeof bits);
            put(bits, 4);
            break;
        }
        case GgmlType::F16:
            put(f16_bits(value), 2);
            break;
        case GgmlType::Q8_0:  // d = value / 127, q[0] = 127, q[1..31] = 0
            put(f16_bits(value / 127.0f), 2);
            put(127, 1);
            for (int i = 1; i < 32; ++i) put(0, 1);
            break;
        default:
            throw SynthError(
                fmt::format("--weights brief: no planted value for type {}", gguf::traits(type).name));
    }
    return b;
}

void plant(const gguf::TensorInfo& t, const Planted& p, std::uint64_t offset, std::span<std::byte> out) {
    const auto block = planted_block(t.type, p.value);
    const auto& tr = gguf::traits(t.type);
    const std::uint64_t row_bytes = t.dims.at(0) / tr.block_size * tr.type_size;
    const std::uint64_t rows = t.dims.size() > 1 ? t.dims[1] : 1;
    const std::uint64_t first = p.row < 0 ? offset / row_bytes : static_cast<std::uint64_t>(p.row);
    const std::uint64_t last = p.row < 0 ? rows : first + 1;
    for (std::uint64_t r = first; r < last && r * row_bytes < offset + out.size(); ++r)
        for (std::size_t i = 0; i < block.size(); ++i) {
            const std::uint64_t at = r * row_bytes + i;
            if (at >= offset && at < offset + out.size()) out[at - offset] = block[i];
        }
}

// Where Weights::brief writes (synth.hpp says why): ĥ's first component is ~sqrt(n_embd) for every token,
// so logits are ~sqrt(n_embd) × output[row][0]: "▁hi" one above end of text, both well above the rest.
std::vector<Planted> brief_plan(const gguf::Model& model) {
    const auto* tokens = model.metadata.find("tokenizer.ggml.tokens");
    const auto eos = model.metadata.get_uint("tokenizer.ggml.eos_token_id");
    const auto embd = model.arch_uint("embedding_length");
    std::int64_t hi = -1;
    if (const auto* list = tokens ? tokens->as_array() : nullptr)
        for (std::size_t i = 0; i < list->items.size(); ++i)
            if (const auto* text = list->items[i].as_string(); text && *text == "\xE2\x96\x81hi")
                hi = static_cast<std::int64_t>(i);
    bool has_output = false;
    for (const auto& t : model.tensors) has_output = has_output || t.name == "output.weight";
    if (hi < 0 || !eos || !embd || !has_output)
        throw SynthError(
            "--weights brief needs a llama-style model with its own output layer and \"▁hi\" in its "
            "vocabulary (the demo preset's)");
    const float scale = std::sqrt(static_cast<float>(*embd));
    const float eos_logit = 11.5f;  // e^11.5 ≈ 10 × what the other ~4000 tokens' logits add up to
    return {{"token_embd.weight", -1, 8.0f},
            {"output_norm.weight", 0, 1.0f},
            {"output.weight", static_cast<std::int64_t>(*eos), eos_logit / scale},
            {"output.weight", hi, (eos_logit + 1.0f) / scale}};
}

}  // namespace

Weights parse_weights(std::string_view s) {
    if (s == "zeros") return Weights::zeros;
    if (s == "small") return Weights::small;
    if (s == "brief") return Weights::brief;
    throw SynthError(fmt::format("unknown weights '{}' (known: zeros, small, brief)", s));
}

Weights default_weights(const gguf::Model& model, std::string_view preset) {
    if (model.tensor_bytes() > (std::uint64_t{1} << 30)) return Weights::zeros;
    if (preset == "demo") {
        try {
            (void)brief_plan(model);
            return Weights::brief;
        } catch (const SynthError&) {  // reshaped past it (a vocabulary without "▁hi"): small values
        }
    }
    return Weights::small;
}

std::uint64_t write_model(const std::filesystem::path& path, const gguf::Model& model, Weights weights) {
    if (weights == Weights::zeros) return gguf::write_file(path, model);
    for (const auto& t : model.tensors) {  // fail before the file exists
        const auto ty = t.type;
        if (ty != GgmlType::F32 && ty != GgmlType::F16 && ty != GgmlType::BF16) scale_fields(ty);
    }
    const auto brief = weights == Weights::brief ? brief_plan(model) : std::vector<Planted>{};
    return gguf::write_file(
        path, model, [&brief](const gguf::TensorInfo& t, std::uint64_t offset, std::span<std::byte> out) {
            fill_small(t, kSeed ^ name_hash(t.name), offset, out);
            for (const auto& p : brief)
                if (p.tensor == t.name) plant(t, p, offset, out);
        });
}

}  // namespace loch::synth
