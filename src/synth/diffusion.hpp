// synth/diffusion — synthetic stable-diffusion.cpp model files: the tensor names and shapes sd.cpp's loader
// expects (read off its blocks: flux.hpp, clip.hpp, tae.hpp, auto_encoder_kl.hpp), all-zero weights (a sparse
// file, valid for every type; sd-server draws a flat image from them). Dimensions sd.cpp reads from the file
// (Flux depth, width, head size) are parameters; the rest is fixed in its code, so it is fixed here.
// Flux.2-dev is three files: the diffusion model (flux2-*), its text encoder Mistral Small 3.2 (an LLM GGUF:
// loch-synth --preset mistral-small-3.2-24b / tiny-mistral-te, sd-server's --llm) and its VAE (flux2-vae).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "gguf/model.hpp"

namespace loch::synth {

struct FluxShape {
    std::uint32_t depth = 1;           // double blocks
    std::uint32_t depth_single = 1;    // single blocks
    std::uint32_t hidden = 256;        // a multiple of head_dim; heads = hidden / 128
    std::uint32_t context_dim = 4096;  // T5-XXL's width (txt_in); sd.cpp feeds zeros without T5. Flux.2:
                                       // 3 × its text encoder's width (three layers' hidden states stacked)
    bool guidance = true;              // flux-dev style guidance embedding
};

// The parts of a diffusion model sd-server loads from separate files (--diffusion-model, --clip_l, --taesd,
// --vae), and one-file SD1.x checkpoints (-m: UNet + CLIP-L + VAE under the LDM prefixes).
enum class DiffusionPart { flux, flux2, clip_l, taef1, taesd, flux_vae, flux2_vae, sd1 };

struct DiffusionPreset {
    std::string name;  // "flux-tiny", "clip-l", "taef1", "taesd", "flux-vae", "sd1.5"
    std::string description;
    DiffusionPart part;
    FluxShape flux;  // part == flux / flux2
};
const std::vector<DiffusionPreset>& diffusion_presets();
const DiffusionPreset* find_diffusion_preset(std::string_view name);

// The file's tensors (2-D weights in `weight_type`, 1-D tensors and norms F32, convolutions F16), offsets
// laid out. Throws SynthError for an impossible shape.
gguf::Model build_diffusion(const DiffusionPreset& p, gguf::GgmlType weight_type = gguf::GgmlType::F16);

}  // namespace loch::synth
