// plan — what a llama.cpp model with given settings will take on each device, before anything starts.
//
// make_plan() reproduces the pinned llama.cpp's own arithmetic (docs/plan.md names the source lines):
// which layers land on which device for -ngl / --tensor-split / --n-cpu-moe, the KV cache with n_ctx
// padding, per-slot streams, per-layer KV heads, cache types, iSWA and MLA, the output buffer, and the
// compute buffer of the worst-case graph, and on the CPU the repacked copy of repackable weights. To that
// it adds what llama.cpp itself never counts: a per-process overhead (GPU: CUDA context and cuBLAS
// workspace, ~600 MiB measured on an H200 after a trivial decode, plus what real prompts add — see
// runtime_growth_bytes; CPU: the process outside its buffers) and a margin.
// Every figure is a MemoryFigure with source `formula` (or `configured` for overhead and margin);
// the engine's dry run (plan/dry_run.hpp) and the engine's log (plan/engine_log.hpp) give the other sources.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json_fwd.hpp>

#include "core/memory.hpp"
#include "gguf/model.hpp"
#include "plan/compute.hpp"
#include "plan/draft.hpp"
#include "plan/lora.hpp"
#include "plan/shape.hpp"

namespace loch::plan {

// What a GPU process grows by once its prompts run through cuBLAS GEMMs (unquantized weights with flash
// attention): lazily loaded kernels, workspace, pool (plan.cpp, measured on the H200: +96 MiB beyond the
// 20 MiB every process grows by).
inline constexpr std::uint64_t kCublasGemmGrowthBytes = 112 * kMiB;

enum class FlashAttn { off, on, automatic };
std::optional<FlashAttn> flash_attn_from_string(std::string_view s);  // "on" | "off" | "auto"

struct Settings {
    std::uint32_t n_ctx = 4096;    // 0 ⇒ the model's training context (llama.cpp -c 0)
    std::uint32_t n_parallel = 1;  // -np: sequences (slots)
    bool kv_unified = false;       // --kv-unified: one KV stream shared by all slots
    int n_gpu_layers = -1;         // -ngl; negative ⇒ all layers (and the output layer)
    std::vector<float>
        tensor_split;  // -ts, one weight per GPU; empty ⇒ even split (llama.cpp splits by free memory)
    std::uint32_t n_cpu_moe = 0;  // --n-cpu-moe: expert tensors of the first N layers stay on the CPU
    std::vector<std::string>
        cpu_tensor_patterns;  // -ot PATTERN=CPU: tensor names matching the regex stay on the CPU
    FlashAttn flash_attn = FlashAttn::automatic;
    gguf::GgmlType type_k = gguf::GgmlType::F16;
    gguf::GgmlType type_v = gguf::GgmlType::F16;
    std::uint32_t n_batch = 2048;
    std::uint32_t n_ubatch = 512;
    std::uint32_t n_outputs_max =
        0;                  // 0 ⇒ as llama-server: n_parallel outputs (llama-fit-params uses n_batch)
    bool swa_full = false;  // --swa-full
    // --embedding / --rerank: the server sets n_batch = n_ubatch when larger, and every token of a batch is
    // an output (tools/server: server_output_limits) — logits rows in the compute graph, logits and
    // embedding rows in the host output buffer. --pooling other than none does the same to the outputs.
    bool embeddings = false;
    std::string pooling;  // "" (the model's own), none, mean, cls, last, rank
    // GPUs the engine will use, in order ("cuda0", "cuda1", "rocm0", "vulkan0", ...). Empty ⇒ CPU only.
    std::vector<std::string> gpus;
    std::uint64_t gpu_overhead_bytes = 600 * kMiB;  // per GPU process: CUDA context, cuBLAS workspace
    // The engine process outside ggml buffers (binary, heap, thread stacks, tokenizer, HTTP server):
    // llama-server's RSS minus its buffers after a 4-ubatch prompt on this CPU build, with headroom.
    std::uint64_t cpu_overhead_bytes = 64 * kMiB;
    // The same for an engine that also runs on a GPU: its runtime's host side (CUDA's driver and libraries,
    // pinned staging) beside the ggml buffers. Measured on an H100 (bench/gpu-offload-host.sh): RssAnon
    // 193–199 MiB after load without a CPU KV cache, up to 306 MiB while an MoE's experts computed on the CPU
    // (12 MiB of it the CPU compute buffer).
    std::uint64_t gpu_engine_host_overhead_bytes = 320 * kMiB;
    // CPU weights of repackable types (x86-64: Q4_0, Q4_K, Q2_K, IQ4_NL, MXFP4; ARM also Q5_K, Q6_K, Q8_0)
    // are copied into the CPU_REPACK buffer at load (ggml-cpu/repack.cpp) while their file pages stay mapped
    // and resident: both count. Only where no GPU runs the engine: with a GPU, llama.cpp lists the GPU's host
    // buffer type before the repack buffer for CPU weights (make_cpu_buft_list), and with mmap it falls back
    // to the mapped file (llama-model-loader: "avoid using a host buffer when using mmap") — no repacked
    // copy, for CPU layers and `-ot …=CPU` alike (measured: RssAnon ~300 MiB beside 4.7 GiB of CPU experts).
    // Off for a build without the repack buffer.
    bool cpu_repack = true;
    double margin_fraction = 0.0;  // added on top of each device's total
    // LoRA adapters (--lora, --lora-scaled): every pair of every adapter, planned as applied (plan/lora.hpp).
    std::vector<LoraPair> lora;
    // Speculative decoding with a draft model: its own context beside this one (plan/draft.hpp). Its
    // figures are in DevicePlan::draft; the target's outputs grow with n_max.
    std::optional<DraftModel> draft;
};

struct DevicePlan {
    std::string device;        // "cuda0", ..., "cpu" (host RAM)
    std::uint32_t layers = 0;  // repeating layers placed here (+1 for the output layer where it lives)
    MemoryFigure weights, repack, kv, compute, output, overhead, margin;
    MemoryFigure adapters;  // LoRA pairs kept here and their products' activations (plan/lora.hpp)
    MemoryFigure draft;     // the draft model's weights, KV, compute, outputs and pool here (plan/draft.hpp)
    std::uint64_t total() const {
        return weights.bytes + repack.bytes + kv.bytes + compute.bytes + output.bytes + overhead.bytes +
               margin.bytes + adapters.bytes + draft.bytes;
    }
};

struct Plan {
    std::string model_name;
    ModelShape shape;
    Settings settings;
    // Derived as llama.cpp derives them.
    std::uint32_t n_ctx = 0;      // padded to 256, a multiple of the streams
    std::uint32_t n_ctx_seq = 0;  // cells per stream
    std::uint32_t n_stream = 1;   // KV streams: 1 when unified, else n_parallel
    std::uint32_t n_ctx_swa = 0;  // cells per stream of the SWA cache (0 without SWA layers)
    std::uint32_t n_ubatch = 0;
    bool flash_attn = true;
    int layers_offloaded = 0;         // as "offloaded X/Y layers to GPU" prints X
    int layers_offloadable = 0;       // Y = n_layer + 1
    std::vector<DevicePlan> devices;  // GPUs first, "cpu" last
    std::vector<std::string> notes;   // assumptions worth telling the user

    const DevicePlan* find(std::string_view device) const;
    std::uint64_t gpu_total() const;  // every non-cpu device
};

// What a GPU process grows by after real prompts (several ubatches), beyond its state after a trivial
// decode: the CUDA backend's memory pool, sized from the pinned source by the largest op's temporaries —
// attention without flash attention (f16 copies of KQ, growing with ubatch x context x heads), the MoE
// expert path — plus 32 MiB of workspaces. H200, ~1100-token prompt at ubatch 512: +20–26 MiB dense with
// flash attention, ~110 MiB MoE, ~140 MiB without flash attention, ~162 MiB MoE without.
std::uint64_t runtime_growth_bytes(const ComputeInputs& in);

// Throws std::runtime_error for settings llama.cpp would reject (n_parallel 0, ubatch 0, ...).
Plan make_plan(const gguf::Model& model, const Settings& settings);

// The draft model's context as the engine makes it from the model's (plan/draft.hpp): the model's padded
// context `target_n_ctx` (Plan::n_ctx), its slots, batch and flash attention; the draft's -ngl and KV types;
// none of the model's tensor overrides, LoRA or embedding mode; one output per slot; no per-process
// overhead or margin (counted once, with the model). Throws without settings.draft.
Settings draft_context_settings(const Settings& target, std::uint32_t target_n_ctx);

// The KV cache in bytes for these settings (all devices together); the unit tests pin it.
std::uint64_t kv_cache_bytes(const ModelShape& shape, const Settings& settings);

// Inverse questions. `budget` is the bytes the device may use in total (overhead and margin included).
// Largest n_ctx (multiple of 256, at most the training context unless allow_beyond_train) that fits on
// `device` with all layers there; nullopt when not even 256 fits.
std::optional<std::uint32_t> max_context(const gguf::Model& model, Settings settings,
                                         const std::string& device, std::uint64_t budget,
                                         bool allow_beyond_train = false);
// Most layers (-ngl) that fit on the first GPU at settings.n_ctx; 0 when none does.
int max_gpu_layers(const gguf::Model& model, Settings settings, std::uint64_t budget);

// The llama-server / llama-fit-params flags that give these settings ("-c 8192 -np 1 -ngl 999 -fa on ...").
std::vector<std::string> engine_args(const Settings& settings);

// "24GiB", "24G", "512 MiB", "1.5GB" (decimal), "123456" (bytes) → bytes; nullopt on anything else.
std::optional<std::uint64_t> parse_bytes(std::string_view text);

void to_json(nlohmann::json& j, const DevicePlan& d);
void to_json(nlohmann::json& j, const Plan& p);

}  // namespace loch::plan
