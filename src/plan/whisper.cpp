// whisper.cpp's memory arithmetic (plan/whisper.hpp has the formulas and where they come from).
#include "plan/whisper.hpp"

#include <cmath>

#include <fmt/format.h>

namespace loch::plan {

namespace {

constexpr std::uint64_t kBufferBase = 1'600'000;    // every compute buffer's fixed part (graph, inputs)
constexpr std::uint64_t kGpuPerBuffer = 2'000'000;  // ggml-cuda's buffers: up to 1.54 MB above the CPU's

std::uint64_t pad256(std::int64_t n) {
    return static_cast<std::uint64_t>((n + 255) / 256 * 256);
}

std::string mb(std::uint64_t b) {
    return fmt::format("{:.2f} MB", double(b) / 1e6);
}

}  // namespace

gguf::WhisperHparams read_whisper_hparams(const std::filesystem::path& model) {
    return gguf::read_whisper(model).hp;
}

WhisperPlan plan_whisper(const gguf::WhisperHparams& hp, const WhisperOptions& o) {
    WhisperPlan p;
    const std::uint64_t S = static_cast<std::uint64_t>(hp.n_text_state);
    const std::uint64_t L = static_cast<std::uint64_t>(hp.n_text_layer);
    const std::uint64_t A = static_cast<std::uint64_t>(hp.n_audio_ctx);
    const std::uint64_t T = static_cast<std::uint64_t>(hp.n_text_ctx);
    const std::uint64_t P = std::max<std::uint32_t>(1, o.processors);

    for (const auto& t : gguf::whisper_tensors(hp)) p.weights += t.bytes;
    p.parts.push_back({"weights", p.weights, "the model's tensors as whisper.cpp creates them"});

    const std::uint64_t self = 4 * L * S * pad256(hp.n_text_ctx);
    const std::uint32_t d = std::max<std::uint32_t>(1, o.max_decoders);
    const std::uint64_t factor = d > 1 ? d + 2 : 1;
    p.kv_self_at_start = self * P;
    const std::uint64_t cross = 4 * L * S * pad256(hp.n_audio_ctx);
    const std::uint64_t pad = 4 * S * pad256(hp.n_audio_ctx);
    p.parts.push_back({fmt::format("kv self ({} decoders)", d), self * factor * P,
                       fmt::format("{} at start × {} (whisper.cpp reallocates it at decoders + 2){}",
                                   mb(self), factor, P > 1 ? fmt::format(" × {} processors", P) : "")});
    p.parts.push_back({"kv cross", cross * P, "4 B · layers · width · 1536"});
    p.parts.push_back({"kv pad", pad * P, "4 B · width · 1536"});
    p.kv = (self * factor + cross + pad) * P;

    const std::uint64_t gpu = o.gpu ? kGpuPerBuffer : 0;
    const std::uint64_t mels = static_cast<std::uint64_t>(hp.n_mels);
    const std::uint64_t vocab = static_cast<std::uint64_t>(hp.n_vocab);
    const std::uint64_t conv = kBufferBase + 24000 * S + 30200 * mels + gpu;
    std::uint64_t encode = kBufferBase + (o.flash_attention ? 28 * A * S : (16 * A + A * A / 16) * S) + gpu;
    if (o.gpu && !o.flash_attention) encode += encode / 2;  // ggml-cuda's pool beside the attention scores
    const std::uint64_t xattn = kBufferBase + 4 * A * S + gpu;
    const std::uint64_t decode = kBufferBase + 4 * vocab * T + 8 * T * S + gpu;
    p.parts.push_back({"compute (conv)", conv * P, "1.6 MB + 24000 B · width + 30200 B · mels"});
    p.parts.push_back(
        {"compute (encode)", encode * P,
         o.flash_attention ? "1.6 MB + 28 B · 1500 · width (flash attention)"
         : o.gpu ? "(1.6 MB + (16 · 1500 + 1500²/16) B · width) × 1.5 (no flash attention, GPU pool)"
                 : "1.6 MB + (16 · 1500 + 1500²/16) B · width (no flash attention)"});
    p.parts.push_back({"compute (cross)", xattn * P, "1.6 MB + 4 B · 1500 · width"});
    p.parts.push_back({"compute (decode)", decode * P, "1.6 MB + 4 B · vocab · 448 + 8 B · 448 · width"});
    p.compute = (conv + encode + xattn + decode) * P;

    p.process = o.gpu ? kWhisperGpuContextBytes : kWhisperProcessBytes;
    p.parts.push_back({o.gpu ? "CUDA context" : "process", p.process,
                       o.gpu ? "measured per process (nvidia-smi)" : "measured RSS beyond ggml's buffers"});
    p.total = p.weights + p.kv + p.compute + p.process;
    return p;
}

std::uint64_t whisper_audio_bytes(std::uint64_t upload_bytes, double seconds, std::int32_t n_mels) {
    const double s = std::max(0.0, seconds);
    const auto pcm = static_cast<std::uint64_t>(std::ceil(s * 16000.0 * 4.0));
    const auto mel = static_cast<std::uint64_t>(std::ceil(s * 100.0 * 4.0 * std::max(0, n_mels)));
    return upload_bytes + pcm + mel;
}

}  // namespace loch::plan
