// plan/diffusion — what one stable-diffusion.cpp generation needs: the weights per component per device
// (from the files and the placement flags) and the compute per phase at W×H (sd.cpp's arithmetic, fitted to
// its own "compute buffer size" lines on synthetic models; docs/images.md). Pure: no engine, no config.
//
// Phases run one after another and free their buffers (text encoder → diffusion step → decoder), so the
// request's transient peak is the largest phase; `n` images and CFG add time, not memory. The weights stay
// resident while the engine is loaded, on the device unless a flag puts a component on the CPU.
//
//   SD1 UNet attention      32 B · L²  (8 heads × f32 scores, L = W/8 · H/8), + 10.4 KB · L + 12 MiB
//   SD1 UNet flash attention 31.5 KB · L + 0.5 MiB, + a padded f32 mask 4 · L · ⌈L⌉₂₅₆ when L % 256 ≠ 0
//   Flux attention          4 B · heads · N² (N = W/16 · H/16 + 256 text tokens), + 50 B · width · N
//   Flux flash attention    61 B · width · N
//   Flux flash attention    + a padded mask 6 B · N · ⌈N⌉₂₅₆ when N % 256 ≠ 0 (f32 and its f16 cast)
//   on a GPU                every phase × 1.08 (ggml-cuda's pool; × 1.16 for a UNet step with flash
//                           attention; the attention scores' share × 1.005), + a 700 MiB context; the pool
//                           stays after the request
//   VAE decode              6657 B/px + 1 MiB (2817 with conv-direct; tiling caps it at the 256² tile)
//   TAESD / TAEF1 decode    1921 B/px + 1 MiB
//   LLM text encoder        4 B · 32 heads · T² + 4 B · T · (3 · ffn + 8 · width) + 16 MiB, T = prompt bytes
//   +
//                           256 (its template; Flux.2 pads to 512 only after encoding, and never truncates)
//
// The largest single tensor of each phase, for a backend that caps one allocation (Vulkan: 4 GiB on RADV,
// whatever the heap): the f32 attention scores (heads · N² · 4 B) without flash attention, the MLP's hidden
// activations, and the decoder's im2col at full resolution (the 256-channel 3x3 convolutions: 4608 B/px in
// f16; conv-direct has none and keeps 1024 B/px of activations), its mid-block attention ((px/64)² · 4 B),
// at the 256² tile when tiled.
#pragma once

#include <cstdint>
#include <filesystem>
#include <optional>
#include <string>
#include <vector>

namespace loch::plan {

enum class DiffusionArch { flux, sd1, unknown };

// The process outside ggml's buffers (binary, HTTP server, tokenizers, image encode): measured ~40 MiB RSS
// on the CPU beyond params + the largest phase; 64 MiB keeps it never under.
inline constexpr std::uint64_t kDiffusionProcessBytes = 64ull << 20;
// With an LLM text encoder, its tokenizer too (sd.cpp's built-in Mistral Tekken: a 131k-entry vocabulary and
// its merges, expanded at load): the CPU run of the Flux.2 set at 256² was 2 MiB over the 64 alone.
inline constexpr std::uint64_t kLlmTokenizerBytes = 32ull << 20;
// On a GPU: the CUDA context and cuBLAS workspace in the process's device memory (nvidia-smi per process),
// beside the params and the compute buffers.
inline constexpr std::uint64_t kDiffusionGpuContextBytes = 700ull << 20;
// …and ggml-cuda's pool beside each phase's buffer: up to 7.7 % of it (the VAE decode, measured), 14.6 % for
// a UNet step with flash attention (the tile kernel's partial results).
inline constexpr double kGpuPoolFactor = 1.08;
inline constexpr double kGpuPoolFactorUnetFlashAttn = 1.16;
// The pool beside a quadratic attention-score buffer is a small share of it: 0.24 % (SD1.5 at 2048x1152,
// 101 MiB beside 41842) and under 0.1 % (Flux at 3008x2000) on the H200; booked at 0.5 %.
inline constexpr double kGpuPoolShareOfScores = 0.005;
// On Vulkan, ggml's graph allocator splits a compute buffer into blocks of at most
// min(1 GiB, maxMemoryAllocationSize) (ggml-vulkan's suballocation_block_size), and a tensor is never reused
// across blocks: a phase above one block needs more than the same graph in one buffer. Measured on lavapipe
// with the pinned sd-server (-v's "compute buffer size", GGML_VK_SUBALLOCATION_BLOCK_SIZE swept from 1 GiB
// down to 3 MB, docs/images.md "Vulkan's blocks"): the tiny decoder up to x1.60 (x1.45 at 1344², which is
// 4797.6 MiB against 3309 in one buffer), a full VAE decode x1.25, a Flux step x1.30 — the most each reached
// as the block shrank to where every tensor has its own. Booked with a margin; a graph nobody measured (a
// UNet step, an LLM text encoder) at the largest.
inline constexpr std::uint64_t kVulkanBlockBytes = 1ull << 30;
inline constexpr double kVulkanBlocksTinyDecoder = 1.65;
inline constexpr double kVulkanBlocksVaeDecoder = 1.30;
inline constexpr double kVulkanBlocksFluxStep = 1.35;
inline constexpr double kVulkanBlocksUnmeasured = 1.65;
std::string_view to_string(DiffusionArch a);
// DiffusionOptions::vulkan_block for an engine of `backend` on a device whose driver allows at most
// `largest_allocation` bytes in one allocation (0: unknown, ggml's own 1 GiB).
std::uint64_t vulkan_block(std::string_view backend, std::uint64_t largest_allocation);

struct DiffusionFiles;
// The process beside the buffers: on a GPU its context (kDiffusionGpuContextBytes), on the CPU the process
// (kDiffusionProcessBytes, + kLlmTokenizerBytes with an LLM text encoder).
std::uint64_t diffusion_process_bytes(const DiffusionFiles& f, bool gpu);

// What the files say: the architecture, Flux's width, and the weights by component.
struct DiffusionFiles {
    DiffusionArch arch = DiffusionArch::unknown;
    std::uint64_t flux_hidden = 0;  // Flux's width (txt_in's output); heads = width / 128
    bool flux2 = false;             // Flux.2 (shared modulation): ≥ 512 text tokens, a wider MLP
    std::uint64_t diffusion_bytes = 0, text_encoder_bytes = 0, vae_bytes = 0;
    std::uint64_t embedded_vae_bytes = 0;  // a one-file checkpoint's own VAE (unused beside --vae/--taesd)
    bool tiny_decoder = false;             // --taesd instead of a full VAE
    bool large_text_encoder = false;       // T5-XXL or an LLM (hundreds of tokens), not CLIP alone
    // An LLM text encoder's (sd-server's `llm`: Flux.2's Mistral) width and FFN width, from its tensors; 0
    // when there is none. Its compute grows with the prompt (docs/images.md, "Long prompts").
    std::uint64_t llm_hidden = 0, llm_ffn = 0;
};
// Reads the GGUF headers (a one-file checkpoint is split by its tensors' prefixes); a file that is not GGUF
// counts by its size and its role. `components` maps sd-server's flags (clip_l, t5xxl, llm, vae, taesd) to
// paths.
DiffusionFiles read_diffusion_files(
    const std::filesystem::path& model,
    const std::vector<std::pair<std::string, std::filesystem::path>>& components);

struct DiffusionOptions {
    bool flash_attention = false, vae_tiling = false, vae_conv_direct = false;
    // Placement flags; they matter only when the engine runs on a GPU (on the CPU everything is host RAM).
    bool clip_on_cpu = false, vae_on_cpu = false, offload_to_cpu = false;
    bool gpu = false;
    // On a Vulkan device: ggml-vulkan's largest compute-buffer block there, min(kVulkanBlockBytes, the
    // driver's largest allocation); 0 on other backends (one buffer per phase).
    std::uint64_t vulkan_block = 0;
    // The request's longest prompt (positive or negative) in bytes; 0 = unknown (the allowance). A byte-level
    // BPE never makes more tokens than bytes, so an LLM text encoder is costed at bytes + its template.
    std::uint64_t prompt_bytes = 0;
};

struct Phase {
    std::string name;  // "text encoder", "diffusion step", "decoder"
    std::uint64_t bytes = 0;
    std::string formula;    // how the figure was obtained, in the terms above
    bool on_device = true;  // false: it runs on the CPU (vae_on_cpu, clip_on_cpu)
    // The attention scores' share of `bytes` (without flash attention): one GEMM output in the graph's
    // buffer, which ggml-cuda's pool does not grow with (see kGpuPoolShareOfScores).
    std::uint64_t scores = 0;
    // Its largest single tensor (one allocation on Vulkan) and what it is.
    std::uint64_t largest_tensor = 0;
    std::string largest_tensor_what;
};

struct DiffusionPlan {
    std::uint64_t width = 0, height = 0;  // as sd.cpp will generate (aligned up)
    std::vector<Phase> phases;
    std::uint64_t device_compute = 0, host_compute = 0;  // the largest phase on each side
    // On a GPU: ggml-cuda's pool as the largest phase left it; the engine keeps it after the request.
    std::uint64_t device_pool = 0;
    std::string largest_phase;
    // The largest single tensor of the phases on the device, and its phase.
    std::uint64_t largest_tensor = 0;
    std::string largest_tensor_phase, largest_tensor_what;
    // Resident weights: on the engine's device, and in host RAM (components the flags keep on the CPU).
    std::uint64_t device_weights = 0, host_weights = 0;
};

// The size sd.cpp generates for a request of w×h: aligned up to 64 px (UNet) or 16 px (DiT).
std::pair<std::uint64_t, std::uint64_t> aligned_size(DiffusionArch arch, std::uint64_t w, std::uint64_t h);

DiffusionPlan plan_diffusion(const DiffusionFiles& f, const DiffusionOptions& o, std::uint64_t w,
                             std::uint64_t h);

// Inverse questions against a budget for one generation's device compute (the device's room beside the
// weights): the largest image of the same aspect (sides in steps of 64) whose compute fits, and the single
// option changes that make w×h itself fit ("VAE tiling (sd.vae_tiling: true): 1.2 GiB").
std::optional<std::pair<std::uint64_t, std::uint64_t>> largest_fitting(const DiffusionFiles& f,
                                                                       const DiffusionOptions& o,
                                                                       std::uint64_t w, std::uint64_t h,
                                                                       std::uint64_t budget);
// The single option changes after which no tensor on the device exceeds `limit` bytes (Vulkan's largest
// allocation), each with its new largest tensor: "direct VAE convolutions (sd.vae_conv_direct: true): 1.0
// GiB".
std::vector<std::string> options_under_allocation(const DiffusionFiles& f, const DiffusionOptions& o,
                                                  std::uint64_t w, std::uint64_t h, std::uint64_t limit);
std::vector<std::string> options_that_fit(const DiffusionFiles& f, const DiffusionOptions& o, std::uint64_t w,
                                          std::uint64_t h, std::uint64_t budget);

}  // namespace loch::plan
