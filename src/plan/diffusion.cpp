#include "plan/diffusion.hpp"

#include <algorithm>
#include <cmath>
#include <system_error>

#include <fmt/format.h>

#include "core/memory.hpp"
#include "gguf/reader.hpp"

namespace loch::plan {

namespace fs = std::filesystem;

std::string_view to_string(DiffusionArch a) {
    switch (a) {
        case DiffusionArch::flux:
            return "flux";
        case DiffusionArch::sd1:
            return "sd1";
        case DiffusionArch::unknown:
            break;
    }
    return "unknown";
}

std::uint64_t vulkan_block(std::string_view backend, std::uint64_t largest_allocation) {
    if (backend != "vulkan") return 0;
    return largest_allocation > 0 ? std::min(kVulkanBlockBytes, largest_allocation) : kVulkanBlockBytes;
}

std::uint64_t diffusion_process_bytes(const DiffusionFiles& f, bool gpu) {
    if (gpu) return kDiffusionGpuContextBytes;
    return kDiffusionProcessBytes + (f.llm_hidden > 0 ? kLlmTokenizerBytes : 0);
}

namespace {

std::uint64_t file_size_or_zero(const fs::path& p) {
    std::error_code ec;
    const auto n = fs::file_size(p, ec);
    return ec ? 0 : n;
}

bool starts_with(const std::string& s, std::string_view prefix) {
    return s.rfind(prefix, 0) == 0;
}

// The diffusion model's file: a Flux model (its width from txt_in) or a one-file SD1 checkpoint (UNet +
// CLIP + VAE under the LDM prefixes, split by them).
void read_model_file(const fs::path& p, DiffusionFiles& f) {
    gguf::Model m;
    try {
        m = gguf::read_model(p, {gguf::kMaxSdCppTensorNameBytes});
    } catch (const std::exception&) {
        f.diffusion_bytes += file_size_or_zero(p);  // safetensors or unreadable: by size, arch unknown
        return;
    }
    for (const auto& t : m.tensors) {
        std::string name = t.name;
        const bool unet = starts_with(name, "model.diffusion_model.");
        if (unet) name = name.substr(std::string_view("model.diffusion_model.").size());
        if ((name == "txt_in.weight") && t.dims.size() == 2) {
            f.arch = DiffusionArch::flux;
            f.flux_hidden = t.dims[1];
        }
        if (name == "double_stream_modulation_img.lin.weight") f.flux2 = true;  // sd.cpp's own test
        if (starts_with(name, "input_blocks.")) f.arch = DiffusionArch::sd1;
        const auto bytes = t.n_bytes();
        if (starts_with(t.name, "cond_stage_model.") || starts_with(t.name, "text_encoders.") ||
            starts_with(t.name, "conditioner."))
            f.text_encoder_bytes += bytes;
        else if (starts_with(t.name, "first_stage_model.") || starts_with(t.name, "vae."))
            f.embedded_vae_bytes += bytes;
        else
            f.diffusion_bytes += bytes;
    }
}

// An LLM text encoder's width (the token embedding's rows) and FFN width (an up projection's rows), in
// llama.cpp's names or the original ones.
void read_llm_shape(const fs::path& p, DiffusionFiles& f) {
    try {
        const auto m = gguf::read_model(p, {gguf::kMaxSdCppTensorNameBytes});
        for (const auto& t : m.tensors) {
            if (t.dims.size() != 2) continue;
            if (t.name.find("token_embd.weight") != std::string::npos ||
                t.name.find("embed_tokens.weight") != std::string::npos)
                f.llm_hidden = std::max(f.llm_hidden, t.dims[0]);
            if (t.name.find("ffn_up.weight") != std::string::npos ||
                t.name.find("up_proj.weight") != std::string::npos)
                f.llm_ffn = std::max(f.llm_ffn, t.dims[1]);
        }
    } catch (const std::exception&) {
        // Not GGUF: its shape is unknown, and the allowance stands (the weights count by size).
    }
}

std::uint64_t component_bytes(const fs::path& p) {
    try {
        return gguf::read_model(p, {gguf::kMaxSdCppTensorNameBytes}).tensor_bytes();
    } catch (const std::exception&) {
        return file_size_or_zero(p);
    }
}

constexpr double kMiBd = double(kMiB);

void largest(Phase& p, double bytes, std::string what) {
    const auto b = static_cast<std::uint64_t>(std::ceil(bytes));
    if (b <= p.largest_tensor) return;
    p.largest_tensor = b;
    p.largest_tensor_what = std::move(what);
}

Phase text_encoder_phase(const DiffusionFiles& f, const DiffusionOptions& o) {
    // An allowance, not a fit: CLIP's 77 tokens take a few MiB; T5-XXL / an LLM over 256–512 tokens more.
    Phase p{"text encoder", (f.large_text_encoder ? 256 : 16) * kMiB,
            f.large_text_encoder ? "allowance for a large text encoder (T5-XXL / LLM, ≤ 512 tokens)"
                                 : "allowance for CLIP (77 tokens)",
            !(o.gpu && (o.clip_on_cpu))};
    if (f.llm_hidden == 0 || o.prompt_bytes == 0) return p;
    // An LLM text encoder runs the whole prompt at once and sd.cpp cuts nothing: its attention is quadratic
    // (sd.cpp fixes Mistral's 32 heads; f32 scores, not flash), its FFN linear. bench/sd-text-encoder.sh
    // measured ~2, 70 and 840 MiB at 5, 300 and 1200 words; tokens are bounded by bytes, not guessed.
    const double t = double(o.prompt_bytes) + 256.0;
    const double scores = 4.0 * 32.0 * t * t;
    const double acts = 4.0 * t * (3.0 * double(f.llm_ffn) + 8.0 * double(f.llm_hidden));
    const double bytes = scores + acts + 16.0 * kMiBd;
    if (bytes > double(p.bytes)) {
        p.bytes = static_cast<std::uint64_t>(std::ceil(bytes));
        p.scores = static_cast<std::uint64_t>(scores);
        p.formula = fmt::format(
            "LLM text encoder: 4 B x 32 heads x T^2 + 4 B x T x (3 x ffn {} + 8 x width {}) "
            "(T = {} prompt bytes + 256)",
            f.llm_ffn, f.llm_hidden, o.prompt_bytes);
    }
    largest(p, scores, fmt::format("the text encoder's attention scores (32 heads x T^2 x 4 B, T <= {})", t));
    largest(p, 4.0 * t * double(f.llm_ffn), "the text encoder's FFN activations (T x ffn x 4 B)");
    return p;
}

Phase diffusion_phase(const DiffusionFiles& f, const DiffusionOptions& o, std::uint64_t w, std::uint64_t h) {
    Phase p{"diffusion step", 0, "", true};
    if (f.arch == DiffusionArch::sd1) {
        const double l = double(w / 8) * double(h / 8);
        if (o.flash_attention) {
            const double padded = std::ceil(l / 256.0) * 256.0;
            // The padding mask as for Flux below; sd.cpp's line at 576² (L = 5184) shows 4 B per element at
            // the UNet's peak (the f16 cast is made after the f32 concatenation is freed there).
            const double mask = (std::fmod(l, 256.0) != 0.0) ? 4.0 * l * padded : 0.0;
            p.bytes = static_cast<std::uint64_t>(std::ceil(31.5 * 1024 * l + 0.5 * kMiBd + mask));
            p.formula = fmt::format("SD1 UNet, flash attention: 31.5 KB x L{} (L = {})",
                                    mask > 0 ? " + padded mask 4 B x L x 256-aligned L" : "", l);
        } else {
            p.scores = static_cast<std::uint64_t>(32.0 * l * l);
            p.bytes = static_cast<std::uint64_t>(std::ceil(32.0 * l * l + 10.4 * 1024 * l + 12 * kMiBd));
            p.formula = fmt::format("SD1 UNet attention: 32 B x L^2 + 10.4 KB x L (L = {})", l);
        }
        // One head's f32 scores are one tensor per head-batch (8 heads in one GEMM output); the GEGLU's
        // 2 x 1280 f32 activations per latent pixel otherwise.
        largest(p, o.flash_attention ? 0.0 : 32.0 * l * l, "the attention scores (8 heads x L^2 x 4 B)");
        largest(p, 10240.0 * l, "the feed-forward activations (2560 x 4 B per latent pixel)");
        return p;
    }
    // Flux (and an unknown DiT: Flux.1's width, the largest known). Flux.2 pads its Mistral text to at least
    // 512 tokens (conditioner.hpp: hidden_states_min_length), and its SiLU-gated MLP (2 × 3 × width) keeps
    // more per token: on the H200 (Flux.2-dev Q8_0, 512² … 1536² and 1344x768) sd.cpp's lines are at most
    // 4 B · heads · N² + 60.2 B · width · N + 6 MiB without flash attention and 78.5 B · width · N (+ the pad
    // mask) with it; booked at 61 and 80.
    const double text_tokens = f.flux2 ? 512 : 256;
    const double n = double(w / 16) * double(h / 16) + text_tokens;
    const double hidden = double(f.flux_hidden ? f.flux_hidden : 3072);
    const double heads = hidden / 128;
    const double attention = o.flash_attention ? 0.0 : 4.0 * heads * n * n;
    // Flash attention pads the keys to 256 and, with no mask of its own, builds one for the padding
    // (ggml_extend.hpp ggml_ext_attention_ext: an f32 zero mask concatenated with a -inf pad, then cast to
    // f16; the concatenation and its cast are alive together): 6 B x N x 256-aligned N when N % 256 != 0.
    // (H200, 3008x2000: sd.cpp's line 7282 MiB where the linear term alone is 4259.)
    const double padded = std::ceil(n / 256.0) * 256.0;
    const double fa_mask = o.flash_attention && std::fmod(n, 256.0) != 0.0 ? 6.0 * n * padded : 0.0;
    p.scores = static_cast<std::uint64_t>(attention);
    // Flash attention: 61 B (the H200's 2949 MiB at 2048² is 60.6 B · width · N). Without it, beside the
    // f32 scores, 50 B: sd.cpp's lines at 512², 768², 1024² and 3008x2000 (341.5, 973.1, 2361.3, 55041 MiB)
    // are all at or under 4 B · heads · N² + 50 B · width · N + 6 MiB, the largest within 0.2 %.
    const double per_token = f.flux2 ? (o.flash_attention ? 80.0 : 61.0) : (o.flash_attention ? 61.0 : 50.0);
    const char* which = f.flux2 ? "Flux.2" : "Flux";
    p.bytes =
        static_cast<std::uint64_t>(std::ceil(6.0 * kMiBd + per_token * hidden * n + attention + fa_mask));
    p.formula = o.flash_attention
                    ? fmt::format("{}, flash attention: {} B x width {} x N{} (N = {})", which, per_token,
                                  hidden, fa_mask > 0 ? " + padded mask 6 B x N x 256-aligned N" : "", n)
                    : fmt::format("{} attention: 4 B x {} heads x N^2 + {} B x width x N (N = {})", which,
                                  heads, per_token, n);
    // The MLP's hidden activations in f32: Flux.2's SiLU-gated 2 x 3 x width, Flux.1's 4 x width.
    const double mlp = f.flux2 ? 6.0 : 4.0;
    largest(p, attention, fmt::format("the attention scores ({} heads x N^2 x 4 B, N = {})", heads, n));
    largest(p, 4.0 * mlp * hidden * n, fmt::format("the MLP's activations ({} x width x N x 4 B)", mlp));
    largest(p, fa_mask / 6.0 * 4.0, "flash attention's padded mask (N x 256-aligned N x 4 B)");
    return p;
}

Phase decoder_phase(const DiffusionFiles& f, const DiffusionOptions& o, std::uint64_t w, std::uint64_t h) {
    const double px = double(w) * double(h);
    Phase p{"decoder", 0, "", !(o.gpu && o.vae_on_cpu)};
    if (f.tiny_decoder) {
        p.bytes = static_cast<std::uint64_t>(std::ceil(1921.0 * px + kMiBd));
        p.formula = "tiny decoder: 1921 B/px";
        largest(p, 64.0 * 9 * 2 * px, "the im2col of a 64-channel 3x3 convolution at full resolution");
        return p;
    }
    // 6656 B/px in sd.cpp's line at 512², +1 MiB per 4 Mpx more at larger sizes (the H200's 26628 MiB at
    // 2048²): 6657 B/px + 1 MiB holds everywhere.
    const double per_px = o.vae_conv_direct ? 2817.0 : 6657.0;
    double bytes = per_px * px + kMiBd;
    p.formula = fmt::format("VAE decode: {} B/px{}", per_px, o.vae_conv_direct ? " (conv-direct)" : "");
    double at = px;  // the pixels one graph decodes
    if (o.vae_tiling && bytes > per_px * 256.0 * 256.0 + kMiBd) {
        bytes = per_px * 256.0 * 256.0 + kMiBd;
        p.formula += ", tiled: the 256x256 tile";
        at = 256.0 * 256.0;
    }
    p.bytes = static_cast<std::uint64_t>(std::ceil(bytes));
    // The decoder's full-resolution level starts from 256 channels (the upsampled features of the level
    // below): im2col of a 3x3 kernel in the weights' f16, or — conv-direct — the f32 activations themselves;
    // and the mid block's single-head attention at latent resolution (px / 64 positions), not flash.
    if (o.vae_conv_direct)
        largest(p, 256.0 * 4 * at, "the 256-channel activations at full resolution (f32)");
    else
        largest(p, 256.0 * 9 * 2 * at,
                "the im2col of a 256-channel 3x3 convolution at full resolution (f16)");
    largest(p, 4.0 * (at / 64) * (at / 64), "the mid-block attention scores ((px/64)^2 x 4 B)");
    return p;
}

}  // namespace

DiffusionFiles read_diffusion_files(const fs::path& model,
                                    const std::vector<std::pair<std::string, fs::path>>& components) {
    DiffusionFiles f;
    read_model_file(model, f);
    bool own_decoder = false;
    for (const auto& [role, path] : components) {
        own_decoder = own_decoder || role == "vae" || role == "taesd";
        const auto bytes = component_bytes(path);
        if (role == "vae" || role == "taesd") {
            f.vae_bytes += bytes;
            if (role == "taesd") f.tiny_decoder = true;
        } else {
            f.text_encoder_bytes += bytes;
            if (role == "t5xxl" || role == "llm") f.large_text_encoder = true;
            if (role == "llm") read_llm_shape(path, f);
        }
    }
    // A checkpoint's own VAE is not loaded when a decoder file is given (sd.cpp's `vae` line says so).
    if (!own_decoder) f.vae_bytes += f.embedded_vae_bytes;
    return f;
}

std::pair<std::uint64_t, std::uint64_t> aligned_size(DiffusionArch arch, std::uint64_t w, std::uint64_t h) {
    // sd.cpp aligns to the VAE scale × the model's patch (64 for a UNet); a DiT needs 16. Unknown: 64.
    const std::uint64_t a = arch == DiffusionArch::flux ? 16 : 64;
    const auto up = [a](std::uint64_t v) { return (std::max<std::uint64_t>(v, 1) + a - 1) / a * a; };
    return {up(w), up(h)};
}

DiffusionPlan plan_diffusion(const DiffusionFiles& f, const DiffusionOptions& o, std::uint64_t w,
                             std::uint64_t h) {
    DiffusionPlan p;
    std::tie(p.width, p.height) = aligned_size(f.arch, w, h);
    p.phases = {text_encoder_phase(f, o), diffusion_phase(f, o, p.width, p.height),
                decoder_phase(f, o, p.width, p.height)};
    if (o.gpu)
        for (std::size_t i = 0; i < p.phases.size(); ++i) {
            auto& ph = p.phases[i];
            if (!ph.on_device) continue;
            if (o.vulkan_block > 0 && ph.bytes > o.vulkan_block) {
                // More than one of ggml-vulkan's blocks: tensors are not reused across blocks
                // (kVulkanBlockBytes).
                const double blocks =
                    i == 2 ? (f.tiny_decoder ? kVulkanBlocksTinyDecoder : kVulkanBlocksVaeDecoder)
                    : i == 1 && f.arch == DiffusionArch::flux ? kVulkanBlocksFluxStep
                                                              : kVulkanBlocksUnmeasured;
                ph.bytes = static_cast<std::uint64_t>(std::ceil(double(ph.bytes) * blocks));
                ph.scores = static_cast<std::uint64_t>(std::ceil(double(ph.scores) * blocks));
                ph.formula +=
                    fmt::format(", x{:.2f} for Vulkan's {} blocks", blocks, human_bytes(o.vulkan_block));
            }
            // Measured on the H200 (nvidia-smi per process): ggml-cuda's memory pool beside each graph's
            // buffer (im2col, dequantized weights, cuBLAS) adds up to 7.7 % of the buffer (the VAE decode).
            // A UNet's flash attention has 40-wide heads, which only the tile kernel runs; its per-block
            // partial results live in the pool: 14.6 % of the step's buffer at 2048x1152.
            // The attention scores (without flash attention) are one GEMM's output in the graph's buffer; the
            // pool beside them is a small share (kGpuPoolShareOfScores), not the 8 % of the activations.
            const bool unet_fa = i == 1 && f.arch == DiffusionArch::sd1 && o.flash_attention;
            const double factor = unet_fa ? kGpuPoolFactorUnetFlashAttn : kGpuPoolFactor;
            const std::uint64_t pool = static_cast<std::uint64_t>(std::ceil(
                double(ph.bytes - ph.scores) * (factor - 1) + double(ph.scores) * kGpuPoolShareOfScores));
            // The pool is never given back: the idle engine keeps the largest any phase grew it to.
            p.device_pool = std::max(p.device_pool, pool);
            ph.bytes += pool;
            ph.formula += ph.scores > 0 ? fmt::format(
                                              ", + the CUDA pool ({:.0f} % of the activations, {:.1f} % "
                                              "of the scores)",
                                              (factor - 1) * 100, kGpuPoolShareOfScores * 100)
                                        : fmt::format(", x{:.2f} for the CUDA pool", factor);
        }
    // --offload-to-cpu: the weights live in RAM and each component is moved to the device for its phase and
    // back (the H200: the idle engine holds its context and pool only, 1164 MiB, and 1024² peaks at the
    // diffusion model + its step). Each phase carries its own component; nothing is resident between them.
    if (o.gpu && o.offload_to_cpu) {
        const std::uint64_t component[] = {f.text_encoder_bytes, f.diffusion_bytes, f.vae_bytes};
        for (std::size_t i = 0; i < p.phases.size() && i < 3; ++i) {
            auto& ph = p.phases[i];
            if (!ph.on_device) continue;
            ph.bytes += component[i];
            ph.formula += fmt::format(", + its weights {} (offload_to_cpu)", human_bytes(component[i]));
        }
    }
    // In host memory, beside the last phase: the image itself (f32 and 8-bit pixels, the PNG, its base64 and
    // the JSON answer) — RSS at 768² on the CPU measured it; 32 B/px keeps it never under.
    if (!o.gpu) {
        auto& dec = p.phases.back();
        dec.bytes += 32 * p.width * p.height;
        dec.formula += " + 32 B/px for the output image";
    }
    std::uint64_t best = 0;
    for (const auto& ph : p.phases) {
        auto& side = ph.on_device ? p.device_compute : p.host_compute;
        side = std::max(side, ph.bytes);
        if (ph.on_device && ph.bytes >= best) best = ph.bytes, p.largest_phase = ph.name;
        if (ph.on_device && ph.largest_tensor > p.largest_tensor) {
            p.largest_tensor = ph.largest_tensor;
            p.largest_tensor_phase = ph.name;
            p.largest_tensor_what = ph.largest_tensor_what;
        }
    }
    if (!o.gpu) {
        p.device_weights = f.diffusion_bytes + f.text_encoder_bytes + f.vae_bytes;
        return p;
    }
    const std::uint64_t te_dev = o.clip_on_cpu ? 0 : f.text_encoder_bytes;
    const std::uint64_t vae_dev = o.vae_on_cpu ? 0 : f.vae_bytes;
    if (o.offload_to_cpu) {
        // Weights live in RAM and move to the device one component at a time, with their phase (above).
        p.device_weights = 0;
        p.host_weights = f.diffusion_bytes + f.text_encoder_bytes + f.vae_bytes;
    } else {
        p.device_weights = f.diffusion_bytes + te_dev + vae_dev;
        p.host_weights = (f.text_encoder_bytes - te_dev) + (f.vae_bytes - vae_dev);
    }
    return p;
}

std::optional<std::pair<std::uint64_t, std::uint64_t>> largest_fitting(const DiffusionFiles& f,
                                                                       const DiffusionOptions& o,
                                                                       std::uint64_t w, std::uint64_t h,
                                                                       std::uint64_t budget) {
    const std::uint64_t side = std::max<std::uint64_t>({w, h, 64});
    // Scale both sides by k/64 of the larger side, largest first; sides in steps of 64, at least 64.
    for (std::uint64_t k = side / 64; k > 0; --k) {
        const std::uint64_t fw = std::max<std::uint64_t>(64, w * k * 64 / side / 64 * 64),
                            fh = std::max<std::uint64_t>(64, h * k * 64 / side / 64 * 64);
        if (plan_diffusion(f, o, fw, fh).device_compute <= budget) return std::pair{fw, fh};
    }
    return std::nullopt;
}

std::vector<std::string> options_under_allocation(const DiffusionFiles& f, const DiffusionOptions& o,
                                                  std::uint64_t w, std::uint64_t h, std::uint64_t limit) {
    std::vector<std::string> out;
    const auto try_one = [&](bool DiffusionOptions::*flag, const char* what) {
        if (o.*flag) return;
        DiffusionOptions t = o;
        t.*flag = true;
        if (const auto p = plan_diffusion(f, t, w, h); p.largest_tensor <= limit)
            out.push_back(fmt::format("{}: its largest tensor is then {} ({})", what,
                                      human_bytes(p.largest_tensor), p.largest_tensor_what));
    };
    try_one(&DiffusionOptions::vae_conv_direct, "direct VAE convolutions (sd.vae_conv_direct: true)");
    try_one(&DiffusionOptions::vae_tiling, "VAE tiling (sd.vae_tiling: true)");
    try_one(&DiffusionOptions::flash_attention, "flash attention (sd.diffusion_fa: true)");
    if (o.gpu) try_one(&DiffusionOptions::vae_on_cpu, "the decoder on the CPU (sd.vae_on_cpu: true)");
    return out;
}

std::vector<std::string> options_that_fit(const DiffusionFiles& f, const DiffusionOptions& o, std::uint64_t w,
                                          std::uint64_t h, std::uint64_t budget) {
    std::vector<std::string> out;
    const auto try_one = [&](bool DiffusionOptions::*flag, const char* what) {
        if (o.*flag) return;
        DiffusionOptions t = o;
        t.*flag = true;
        const auto p = plan_diffusion(f, t, w, h);
        if (p.device_compute <= budget)
            out.push_back(
                fmt::format("{}: {} at {}x{}", what, human_bytes(p.device_compute), p.width, p.height));
    };
    try_one(&DiffusionOptions::vae_tiling, "VAE tiling (sd.vae_tiling: true)");
    try_one(&DiffusionOptions::flash_attention, "flash attention (sd.diffusion_fa: true)");
    if (!f.tiny_decoder)
        try_one(&DiffusionOptions::vae_conv_direct, "direct VAE convolutions (sd.vae_conv_direct: true)");
    // No single change is enough: the two that shrink the two phases, together.
    if (out.empty() && !o.vae_tiling && !o.flash_attention) {
        DiffusionOptions both = o;
        both.vae_tiling = both.flash_attention = true;
        const auto p = plan_diffusion(f, both, w, h);
        if (p.device_compute <= budget)
            out.push_back(
                fmt::format("flash attention and VAE tiling together (sd.diffusion_fa, sd.vae_tiling): "
                            "{} at {}x{}",
                            human_bytes(p.device_compute), p.width, p.height));
    }
    return out;
}

}  // namespace loch::plan
