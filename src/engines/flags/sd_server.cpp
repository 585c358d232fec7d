// Every flag of the pinned sd-server (stable-diffusion.cpp from stable-diffusion-cpp-python 0.4.7,
// examples/common + examples/server), classified for `sd.extra` (engines/flags/table.hpp).
#include "engines/flags/table.hpp"

namespace loch::engines::flags {

namespace sd_server_table {  // named: the four tables share a unity batch

constexpr auto N = FlagClass::neutral;
constexpr auto R = FlagClass::refused;
constexpr auto L = FlagClass::loch;

constexpr std::string_view kComponent =
    "set it in the model's sd: section, so that the planner counts its weights";
constexpr std::string_view kOtherModel =
    "another model file beside the ones configured: weights and compute loch does not plan";
constexpr std::string_view kArith = "a default of the sampling arithmetic: no allocation";
constexpr std::string_view kLowers =
    "only lowers the memory of the graph it changes: the reservation stays above";
constexpr std::string_view kRequestInput =
    "inputs come with each request; a default file read from this machine for every request is not loch's";
constexpr std::string_view kHires = "a second pass at a larger size (highres fix) that loch does not plan";
constexpr std::string_view kUpscale =
    "an upscaler model runs after the image: weights and compute loch does not plan";
constexpr std::string_view kCache = "caches activations between steps: memory loch does not plan";

const FlagTable kTable{
    "sd-server",
    /*equals_form=*/false,
    /*underscores_are_hyphens=*/false,
    {
        {{"-l", "--listen-ip"}, 1, L, "engines listen on 127.0.0.1, reachable only by loch"},
        {{"--listen-port"}, 1, L, "loch gives each engine its port"},
        {{"--serve-html-path"}, 1, R, "serves a file: engines serve only loch's requests"},
        {{"-v", "--verbose"}, 0, L, "loch starts sd-server verbose to read its buffer sizes"},
        {{"--color"}, 0, L, "loch reads the engine's log as printed by default"},
        {{"-h", "--help"}, 0, R, "it prints and exits: the engine would never serve"},
        {{"-m", "--model"}, 1, L, "the model's path"},
        {{"--diffusion-model"}, 1, L, "the model's path"},
        {{"--clip_l"}, 1, L, kComponent},
        {{"--clip_g"}, 1, L, kComponent},
        {{"--t5xxl"}, 1, L, kComponent},
        {{"--llm"}, 1, L, kComponent},
        {{"--qwen2vl"}, 1, L, kComponent},
        {{"--vae"}, 1, L, kComponent},
        {{"--taesd"}, 1, L, kComponent},
        {{"--tae"}, 1, L, kComponent},
        {{"--clip_vision"}, 1, R, kOtherModel},
        {{"--llm_vision"}, 1, R, kOtherModel},
        {{"--qwen2vl_vision"}, 1, R, kOtherModel},
        {{"--high-noise-diffusion-model"}, 1, R, kOtherModel},
        {{"--control-net"}, 1, R, kOtherModel},
        {{"--photo-maker"}, 1, R, kOtherModel},
        {{"--upscale-model"}, 1, R, kUpscale},
        {{"--embd-dir"}, 1, R, "textual-inversion embeddings loaded per prompt: weights loch does not plan"},
        {{"--lora-model-dir"}, 1, R, "LoRA weights applied per request: weights loch does not plan"},
        {{"--hires-upscalers-dir"}, 1, R, kUpscale},
        {{"--tensor-type-rules"}, 1, R, "converts weights to other types at load: sizes loch does not plan"},
        {{"--type"}, 1, R, "converts weights to another type at load: sizes loch does not plan"},
        {{"-t", "--threads"}, 1, L, "set sd.threads: loch counts an engine's compute threads on the CPU"},
        {{"--chroma-t5-mask-pad"}, 1, N, kArith},
        {{"--max-vram"}, 1, R, "segmented execution moves weights in and out of the device: not planned"},
        {{"--force-sdxl-vae-conv-scale"}, 0, N, kArith},
        {{"--offload-to-cpu"}, 0, L, "set sd.offload_to_cpu, so that the planner sees it"},
        {{"--mmap"}, 0, R, "loch plans sd.cpp's default loading; a mapped file changes host residency"},
        {{"--control-net-cpu"}, 0, R, kOtherModel},
        {{"--clip-on-cpu"}, 0, L, "set sd.clip_on_cpu, so that the planner sees it"},
        {{"--vae-on-cpu"}, 0, L, "set sd.vae_on_cpu, so that the planner sees it"},
        {{"--fa"}, 0, N, kLowers},
        {{"--diffusion-fa"}, 0, L, "set sd.diffusion_fa, so that the planner sees it"},
        {{"--diffusion-conv-direct"}, 0, N, kLowers},
        {{"--vae-conv-direct"}, 0, L, "set sd.vae_conv_direct, so that the planner sees it"},
        {{"--circular"}, 0, N, kArith},
        {{"--circularx"}, 0, N, kArith},
        {{"--circulary"}, 0, N, kArith},
        {{"--chroma-disable-dit-mask"}, 0, N, kArith},
        {{"--qwen-image-zero-cond-t"}, 0, N, kArith},
        {{"--chroma-enable-t5-mask"}, 0, N, kArith},
        {{"--rng"}, 1, N, kArith},
        {{"--sampler-rng"}, 1, N, kArith},
        {{"--prediction"}, 1, N, kArith},
        {{"--lora-apply-mode"}, 1, N, "how LoRA applies; LoRA itself (--lora-model-dir) is refused"},
        {{"-p", "--prompt"}, 1, N, "a default prompt: text"},
        {{"-n", "--negative-prompt"}, 1, N, "a default prompt: text"},
        {{"-i", "--init-img"}, 1, R, kRequestInput},
        {{"--end-img"}, 1, R, kRequestInput},
        {{"--mask"}, 1, R, kRequestInput},
        {{"--control-image"}, 1, R, kRequestInput},
        {{"--control-video"}, 1, R, kRequestInput},
        {{"--pm-id-images-dir"}, 1, R, kRequestInput},
        {{"--pm-id-embed-path"}, 1, R, kRequestInput},
        {{"-r", "--ref-image"}, 1, R, kRequestInput},
        {{"--hires-upscaler"}, 1, R, kHires},
        {{"-H", "--height"},
         1,
         L,
         "the size comes with each request; loch plans it per request (sd.max_size caps it)"},
        {{"-W", "--width"},
         1,
         L,
         "the size comes with each request; loch plans it per request (sd.max_size caps it)"},
        {{"--steps"}, 1, L, "set sd.steps"},
        {{"--high-noise-steps"}, 1, N, kArith},
        {{"--clip-skip"}, 1, N, kArith},
        {{"-b", "--batch-count"},
         1,
         R,
         "images per request come with the request; a larger default batch is not planned"},
        {{"--video-frames"}, 1, R, "video frames multiply the latent: compute loch does not plan"},
        {{"--fps"}, 1, N, "a video's frame rate: no allocation"},
        {{"--timestep-shift"}, 1, N, kArith},
        {{"--upscale-repeats"}, 1, R, kUpscale},
        {{"--upscale-tile-size"}, 1, R, kUpscale},
        {{"--hires-width"}, 1, R, kHires},
        {{"--hires-height"}, 1, R, kHires},
        {{"--hires-steps"}, 1, R, kHires},
        {{"--hires-upscale-tile-size"}, 1, R, kHires},
        {{"--hires-scale"}, 1, R, kHires},
        {{"--hires-denoising-strength"}, 1, R, kHires},
        {{"--hires"}, 0, R, kHires},
        {{"--cfg-scale"}, 1, L, "set sd.cfg_scale"},
        {{"--img-cfg-scale"}, 1, N, kArith},
        {{"--guidance"}, 1, N, kArith},
        {{"--slg-scale"}, 1, N, kArith},
        {{"--skip-layer-start"}, 1, N, kArith},
        {{"--skip-layer-end"}, 1, N, kArith},
        {{"--eta"}, 1, N, kArith},
        {{"--flow-shift"}, 1, N, kArith},
        {{"--high-noise-cfg-scale"}, 1, N, kArith},
        {{"--high-noise-img-cfg-scale"}, 1, N, kArith},
        {{"--high-noise-guidance"}, 1, N, kArith},
        {{"--high-noise-slg-scale"}, 1, N, kArith},
        {{"--high-noise-skip-layer-start"}, 1, N, kArith},
        {{"--high-noise-skip-layer-end"}, 1, N, kArith},
        {{"--high-noise-eta"}, 1, N, kArith},
        {{"--strength"}, 1, N, kArith},
        {{"--pm-style-strength"}, 1, N, kArith},
        {{"--control-strength"}, 1, N, kArith},
        {{"--moe-boundary"}, 1, N, kArith},
        {{"--vace-strength"}, 1, N, kArith},
        {{"--vae-tile-overlap"}, 1, N, "overlap between VAE tiles: the tile's own size is unchanged"},
        {{"--increase-ref-index"}, 0, N, kArith},
        {{"--disable-auto-resize-ref-image"}, 0, N, kArith},
        {{"--disable-image-metadata"}, 0, N, "metadata in the PNG: text"},
        {{"--vae-tiling"}, 0, L, "set sd.vae_tiling, so that the planner sees it"},
        {{"-s", "--seed"}, 1, N, kArith},
        {{"--sampling-method"}, 1, L, "set sd.sampler"},
        {{"--high-noise-sampling-method"}, 1, N, kArith},
        {{"--scheduler"}, 1, L, "set sd.scheduler"},
        {{"--sigmas"}, 1, N, kArith},
        {{"--skip-layers"}, 1, N, kArith},
        {{"--high-noise-skip-layers"}, 1, N, kArith},
        {{"--cache-mode"}, 1, R, kCache},
        {{"--cache-option"}, 1, R, kCache},
        {{"--scm-mask"}, 1, R, kCache},
        {{"--scm-policy"}, 1, R, kCache},
        {{"--vae-tile-size"}, 1, R, "loch plans VAE tiles of the default size; larger tiles need more"},
        {{"--vae-relative-tile-size"},
         1,
         R,
         "loch plans VAE tiles of the default size; larger tiles need more"},
    }};

}  // namespace sd_server_table

const FlagTable& sd_server() {
    return sd_server_table::kTable;
}

}  // namespace loch::engines::flags
