// plan/engine_log — what a running llama-server really allocated, read from its startup log.
//
// The planner's formulas are estimates; the log is the truth. The broker feeds a started engine's log
// text (stdout+stderr) to parse_engine_log() and replaces its reservation with the measured footprint.
// Run llama-server with `-lv 4` (or higher): this llama.cpp prints buffer sizes only at that verbosity.
//
// Lines understood (any prefix before the function name is ignored: timestamps, log levels):
//   load_tensors:   CPU_Mapped model buffer size =  4026.00 MiB
//   llama_context:  CUDA_Host  output buffer size =     0.49 MiB
//   llama_kv_cache:      CUDA0 KV buffer size =   512.00 MiB
//   llama_kv_cache: size =  512.00 MiB (  4096 cells,  32 layers,  1/1 seqs), K (f16): 256.00 MiB, V (f16):
//   ... llama_memory_recurrent:  CPU RS buffer size = ... llama_context:      CUDA0 compute buffer size =
//   112.00 MiB load_tensors: offloaded 33/33 layers to GPU common_memory_breakdown_print: |   - CUDA0 (H200)
//   | 143771 = 1234 + (5000 = 4026 + 512 + 112) + 597 | common_memory_breakdown_print: |   - Host         |
//   531 = 500 + 20 + 11 |
//   clip_ctx: CLIP using CUDA0 backend                     (the projector's backend, then its weights:)
//   load_hparams: model size:         595.49 MiB
//   reserve_compute_meta:      CUDA0 compute buffer size =    21.55 MiB
//   common_speculative_init_result: loading draft model '…'   (then the draft's own buffer lines)
// When the log holds several loads (`--fit on` runs a dry run first; a restart appends), the last load wins.
// Malformed or truncated lines are skipped, never fatal: this is outside input.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json_fwd.hpp>

#include "core/memory.hpp"

namespace loch::plan {

// What llama.cpp allocated in one backend buffer type ("CUDA0", "CUDA_Host", "CPU", "CPU_Mapped", ...).
struct BufferSizes {
    std::string buffer;  // as llama.cpp names it
    std::string device;  // loch's device id: "cuda0", "rocm1", "vulkan0", ...; "cpu" for every host buffer
    std::uint64_t model = 0;
    std::uint64_t kv = 0;         // KV cache (all caches of an iSWA model summed)
    std::uint64_t recurrent = 0;  // recurrent state (RS buffer)
    std::uint64_t compute = 0;
    std::uint64_t output = 0;
    // The vision projector (--mmproj, tools/mtmd/clip.cpp): its weights on the backend it says it uses, and
    // its image encoder's compute buffer — separate from the language model's buffers of the same name.
    std::uint64_t projector_weights = 0;
    std::uint64_t projector_compute = 0;
    // A draft model (--spec-draft-model): its buffers after "loading draft model", kept apart from the
    // model's of the same name.
    std::uint64_t draft_model = 0, draft_kv = 0, draft_compute = 0, draft_output = 0;
    std::uint64_t draft() const { return draft_model + draft_kv + draft_compute + draft_output; }
    std::uint64_t total() const {
        return model + kv + recurrent + compute + output + projector_weights + projector_compute + draft();
    }
};

// One row of common_memory_breakdown_print, in MiB as printed.
struct BreakdownRow {
    std::string name;  // "CUDA0 (H200)", "Host"
    bool is_host = false;
    std::optional<std::int64_t> total_mib, free_mib;  // devices only
    std::int64_t self_mib = 0, model_mib = 0, context_mib = 0, compute_mib = 0;
    std::optional<std::int64_t> unaccounted_mib;  // devices only: total - free - self
};

struct KvSummary {
    std::uint64_t bytes = 0;
    std::uint32_t cells = 0;
    std::uint32_t layers = 0;
    std::string type_k, type_v;
};

struct EngineFootprint {
    std::vector<BufferSizes> buffers;     // in order of first appearance
    std::optional<int> layers_offloaded;  // "offloaded X/Y layers to GPU"
    std::optional<int> layers_offloadable;
    std::vector<KvSummary> kv_caches;     // one per "llama_kv_cache: size = ..." line (iSWA: two)
    std::vector<BreakdownRow> breakdown;  // the last memory breakdown table
    bool any() const { return !buffers.empty() || !kv_caches.empty() || !breakdown.empty(); }

    // Sum of every buffer on a device ("cuda0", "cpu"), as a measured figure naming the log.
    MemoryFigure device_total(std::string_view device) const;
    // Devices that hold at least one buffer, host last.
    std::vector<std::string> devices() const;
    const BufferSizes* find_buffer(std::string_view buffer) const;
};

// Maps a llama.cpp buffer or device name to loch's device id: "CUDA0" → "cuda0", "CUDA_Host" → "cpu",
// "CPU_Mapped" → "cpu", "ROCm1" → "rocm1", "Vulkan0" → "vulkan0", "Metal" → "metal".
std::string device_of_buffer(std::string_view buffer);

EngineFootprint parse_engine_log(std::string_view log_text);

void to_json(nlohmann::json& j, const BufferSizes& b);
void to_json(nlohmann::json& j, const EngineFootprint& f);

}  // namespace loch::plan
