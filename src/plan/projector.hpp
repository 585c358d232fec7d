// plan/projector — what a llama-server vision projector (`--mmproj`, tools/mtmd/clip.cpp of the pinned
// llama.cpp) holds on its device, from the projector GGUF alone. Pure: no engine, no config.
//
// clip.cpp loads the projector's tensors into one buffer on the engine's main device (the first GPU it sees;
// the CPU when it sees none) and, at load, reserves the image encoder's compute buffer for a warm-up image
// of `clip.vision.image_size`² (get_dummy_batch). For a fixed-resolution projector — LLaVA's `mlp`: every
// image is resized to that square, so every image makes (image_size / patch_size)² tokens — that buffer is
// all an image ever uses, and an image request costs its tokens in the slot's context and nothing on the
// device beyond the engine. Projectors that resize by image (Qwen2-VL and later, tiles, pinpoints) grow the
// buffer with the image; loch does not model them yet and refuses them at config time (docs/batches.md).
//
// The compute buffer is bounded from above by the tensors alive at once in the encoder's largest phase
// (f32 activations; E = tower width, P = patches + 1 class token, H = heads, F = feed-forward, T = text
// width, N = patches), plus the inputs, which are never freed before the end (counted although ggml-alloc
// reuses them):
//   inputs      S²·3·4 (the image) + N·3·p²·4 (im2col) + 2·N·E·4 (patch embeddings, transposed)
//               + 2·P·E·4 (with the class token, the positions' rows)
//   attention   8·P·E·4 + P²·H·4 (the scores; soft_max runs in place)   — flash attention: 7·P·E·4
//   ffn         3·P·E·4 + P·F·4
//   projector   P·E·4 + 2·N·T·4
// Against the pinned engine's "reserve_compute_meta: … compute buffer size" (LLaVA 1.5, 336 px, on 2 CPU
// cores: 32.88 MiB without flash attention, 21.55 MiB with) the bound is 49.9 / 31.8 MiB; the sweep over
// image sizes, widths and flash attention is tests/integration/plan/projector_vs_engine_test.cpp.
//
// On a GPU clip.cpp runs on a CUDA backend of its own (ggml_backend_dev_init): its own cuBLAS handle and
// workspace and its own ggml-cuda pool, allocated at the first image. On the H200 (bench/h200-vision.sh,
// bench/results/h200-2026-12-04-vision.txt) the process grew by 99–116 MiB beyond the projector's weights
// and compute buffer after its first image, for four tower shapes with and without flash attention (the
// buffers themselves: exactly as on the CPU). Planned: kProjectorGpuBackendBytes + the pool's largest
// converted matmul operand, N·T·4.
#pragma once

#include <cstdint>
#include <stdexcept>
#include <string>

#include "gguf/model.hpp"

namespace loch::plan {

// A second CUDA backend in the engine process: cuBLAS handle and workspace, ggml-cuda's pool granules.
inline constexpr std::uint64_t kProjectorGpuBackendBytes = 160ull << 20;

struct ProjectorPlan {
    std::string type;  // clip.projector_type: "mlp"
    std::uint32_t image_size = 0, patch_size = 0;
    std::uint32_t image_tokens = 0;                         // per image, in the language model's context
    std::uint32_t text_embd = 0;                            // what the language model's n_embd must be
    std::uint64_t weights = 0;                              // the projector's tensor bytes
    std::uint64_t compute_flash = 0, compute_no_flash = 0;  // the encoder's compute buffer bound
    std::uint64_t gpu_extra = 0;  // beside it on a GPU: its CUDA backend's workspace and pool

    // On a device: weights + compute (+ its backend's extra on a GPU). Flash attention unknown (auto):
    // without it.
    std::uint64_t bytes(bool gpu, std::optional<bool> flash_attention) const {
        return weights + (flash_attention.value_or(false) ? compute_flash : compute_no_flash) +
               (gpu ? gpu_extra : 0);
    }
};

// Throws std::invalid_argument naming what is missing or unsupported ("projector type 'qwen2vl' resizes
// images by their size; loch plans fixed-resolution projectors (mlp) only").
ProjectorPlan plan_projector(const gguf::Model& mmproj);

}  // namespace loch::plan
