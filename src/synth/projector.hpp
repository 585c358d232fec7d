// synth/projector — synthetic multimodal projectors ("mmproj" files) for llama-server's `--mmproj`: a CLIP
// vision tower and LLaVA's two-layer MLP projector with exactly the keys and tensor names the pinned
// llama.cpp's tools/mtmd/clip.cpp loads (clip-impl.h: KEY_*, TN_*), zero weights (a sparse file). The
// projector's output width must equal the language model's embedding width (mtmd refuses a mismatch), so
// it is a parameter: `loch-synth --mmproj llava-1.5 --text-embd 4096`.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "gguf/model.hpp"

namespace loch::synth {

// A fixed-resolution CLIP ViT (every image is resized to image_size²) with the `mlp` projector.
struct ProjectorShape {
    std::uint32_t image_size = 336;
    std::uint32_t patch_size = 14;
    std::uint32_t n_embd = 1024;  // the vision tower's width
    std::uint32_t n_head = 16;
    std::uint32_t n_ff = 4096;
    std::uint32_t n_layer = 23;      // as LLaVA's converter writes it: the last CLIP block is dropped
    std::uint32_t text_embd = 4096;  // mm.0/mm.2 output: the language model's n_embd
    float eps = 1e-5f;

    std::uint32_t patches() const { return (image_size / patch_size) * (image_size / patch_size); }
};

struct ProjectorPreset {
    std::string name;  // "llava-1.5", "llava-tiny"
    std::string description;
    ProjectorShape shape;
};
const std::vector<ProjectorPreset>& projector_presets();
const ProjectorPreset* find_projector_preset(std::string_view name);

// Throws SynthError for an impossible shape (image not a whole number of patches, width not divisible by
// the heads, …).
gguf::Model build_projector(const ProjectorShape& s, gguf::GgmlType weight_type = gguf::GgmlType::F16);

}  // namespace loch::synth
