// Weight data: zeros (a sparse hole, valid for every type) or small deterministic values. For quantized
// types random bytes are valid quants as long as the fp16 scales are finite, so each block gets random
// bytes with its scale fields (d, dmin/m) overwritten by a small constant: no NaN/Inf can arise.
#include <array>
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

}  // namespace

Weights parse_weights(std::string_view s) {
    if (s == "zeros") return Weights::zeros;
    if (s == "small") return Weights::small;
    throw SynthError(fmt::format("unknown weights '{}' (known: zeros, small)", s));
}

Weights default_weights(const gguf::Model& model) {
    return model.tensor_bytes() > (std::uint64_t{1} << 30) ? Weights::zeros : Weights::small;
}

std::uint64_t write_model(const std::filesystem::path& path, const gguf::Model& model, Weights weights) {
    if (weights == Weights::zeros) return gguf::write_file(path, model);
    for (const auto& t : model.tensors) {  // fail before the file exists
        const auto ty = t.type;
        if (ty != GgmlType::F32 && ty != GgmlType::F16 && ty != GgmlType::BF16) scale_fields(ty);
    }
    return gguf::write_file(path, model,
                            [](const gguf::TensorInfo& t, std::uint64_t offset, std::span<std::byte> out) {
                                fill_small(t, kSeed ^ name_hash(t.name), offset, out);
                            });
}

}  // namespace loch::synth
