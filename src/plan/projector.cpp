#include "plan/projector.hpp"

#include <fmt/format.h>

namespace loch::plan {

namespace {

std::uint32_t need_uint(const gguf::Model& m, const char* key) {
    const auto v = m.metadata.get_uint(key);
    if (!v || *v == 0 || *v > (1u << 20))
        throw std::invalid_argument(fmt::format("the projector has no valid '{}'", key));
    return static_cast<std::uint32_t>(*v);
}

}  // namespace

ProjectorPlan plan_projector(const gguf::Model& m) {
    if (m.architecture() != "clip")
        throw std::invalid_argument(fmt::format(
            "not a projector: general.architecture is '{}', not 'clip' (llama.cpp's mmproj files)",
            m.architecture()));
    const auto vision = m.metadata.find("clip.has_vision_encoder");
    if (!vision || !std::get_if<bool>(&vision->data) || !std::get<bool>(vision->data))
        throw std::invalid_argument("the projector has no vision encoder (clip.has_vision_encoder)");
    ProjectorPlan p;
    p.type = m.metadata.get_string("clip.projector_type")
                 .value_or(m.metadata.get_string("clip.vision.projector_type").value_or(""));
    if (p.type != "mlp")
        throw std::invalid_argument(fmt::format(
            "projector type '{}': loch plans fixed-resolution projectors (LLaVA's 'mlp') only; one that "
            "sizes its image encoder by the image could need more than loch would reserve",
            p.type));
    if (m.metadata.find("clip.vision.image_grid_pinpoints"))
        throw std::invalid_argument(
            "the projector tiles images (clip.vision.image_grid_pinpoints, LLaVA 1.6): an image makes up to "
            "5 tiles of tokens; loch plans single-tile projectors only");
    p.image_size = need_uint(m, "clip.vision.image_size");
    p.patch_size = need_uint(m, "clip.vision.patch_size");
    const std::uint64_t E = need_uint(m, "clip.vision.embedding_length");
    const std::uint64_t H = need_uint(m, "clip.vision.attention.head_count");
    const std::uint64_t F = need_uint(m, "clip.vision.feed_forward_length");
    const auto* mm2 = m.find_tensor("mm.2.weight");
    if (!mm2 || mm2->dims.size() < 2)
        throw std::invalid_argument("the projector has no mm.2.weight (LLaVA's second projection)");
    p.text_embd = static_cast<std::uint32_t>(mm2->dims[1]);
    const std::uint64_t side = p.image_size / p.patch_size, N = side * side, P = N + 1, S = p.image_size,
                        T = p.text_embd, a = P * E * 4;
    p.image_tokens = static_cast<std::uint32_t>(N);
    p.weights = m.tensor_bytes();
    // The input phase whole: image, im2col, patch embeddings and their transposed copy, the class token
    // joined, the positions' rows.
    const std::uint64_t inputs =
        S * S * 3 * 4 + N * 3 * p.patch_size * p.patch_size * 4 + 2 * N * E * 4 + 2 * a;
    const std::uint64_t ffn = 3 * a + P * F * 4, projector = a + 2 * N * T * 4;
    p.compute_no_flash = inputs + std::max({8 * a + P * P * H * 4, ffn, projector});
    p.compute_flash = inputs + std::max({7 * a, ffn, projector});
    p.gpu_extra = kProjectorGpuBackendBytes + N * T * 4;
    return p;
}

}  // namespace loch::plan
