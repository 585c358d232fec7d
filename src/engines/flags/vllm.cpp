// The flags of `vllm serve` that loch knows (vLLM's engine and frontend arguments as of v0.21), classified
// for `vllm.extra` (engines/flags/table.hpp). vLLM has hundreds of flags and none runs here (its kind is
// tested against a double): a flag this table does not list is refused like any unknown flag, with the
// reason — add it here, with its class and why, once checked against vLLM's source.
//
// vLLM's memory is bounded by the fraction loch passes (--gpu-memory-utilization, or
// --kv-cache-memory-bytes plus the planned weights and overhead): what changes the split inside that bound
// (context, batch, quantization, CUDA graphs) is neutral for loch's ledger; what reaches outside it (host
// RAM for offload and swap, other GPUs) is loch's or refused.
#include "engines/flags/table.hpp"

namespace loch::engines::flags {

namespace vllm_table {  // named: the four tables share a unity batch

constexpr auto N = FlagClass::neutral;
constexpr auto R = FlagClass::refused;
constexpr auto L = FlagClass::loch;

constexpr std::string_view kInside =
    "changes how vLLM splits the memory it takes, which loch bounds by the utilization it passes";
constexpr std::string_view kText = "serving behaviour: no allocation";
constexpr std::string_view kPlacement = "which GPUs a model uses is loch's placement (devices: in the model)";

const FlagTable kTable{
    "vllm",
    /*equals_form=*/true,
    /*underscores_are_hyphens=*/true,
    {
        {{"--host"}, 1, L, "engines listen on 127.0.0.1, reachable only by loch"},
        {{"--port"}, 1, L, "loch gives each engine its port"},
        {{"--api-key"}, 1, L, "loch hands each engine its own secret"},
        {{"--served-model-name"}, 1, L, "answers name the model as loch's config does"},
        {{"--gpu-memory-utilization"},
         1,
         L,
         "loch passes the fraction it reserves (memory: or vllm.gpu_memory_utilization)"},
        {{"--kv-cache-memory-bytes"}, 1, L, "set vllm.kv_cache_memory"},
        {{"--max-model-len"}, 1, L, "set vllm.max_model_len (loch checks requests against it)"},
        {{"--max-num-seqs"}, 1, L, "set vllm.max_num_seqs (loch's slots)"},
        {{"--enable-sleep-mode"}, 0, L, "set vllm.sleep_level"},
        {{"--tensor-parallel-size", "-tp"}, 1, R, kPlacement},
        {{"--pipeline-parallel-size", "-pp"}, 1, R, kPlacement},
        {{"--data-parallel-size", "-dp"}, 1, R, kPlacement},
        {{"--cpu-offload-gb"}, 1, R, "weights offloaded to host RAM are not booked there"},
        {{"--swap-space"}, 1, R, "swap space is host RAM per GPU that loch does not book"},
        {{"--kv-offloading-size"}, 1, R, "KV offloaded to host RAM is not booked there"},
        {{"--download-dir"}, 1, R, "loch runs local model folders: set path"},
        {{"--tokenizer"}, 1, N, "which tokenizer files: text"},
        {{"--revision"}, 1, R, "a revision is fetched from the network; loch runs local model folders"},
        {{"--trust-remote-code"}, 0, R, "runs Python code from the model folder; not loch's to allow"},
        {{"--dtype"}, 1, N, kInside},
        {{"--quantization", "-q"}, 1, N, kInside},
        {{"--kv-cache-dtype"}, 1, N, kInside},
        {{"--max-num-batched-tokens"}, 1, N, kInside},
        {{"--block-size"}, 1, N, kInside},
        {{"--enforce-eager"}, 0, N, kInside},
        {{"--enable-prefix-caching", "--no-enable-prefix-caching"}, 0, N, kInside},
        {{"--enable-chunked-prefill", "--no-enable-chunked-prefill"}, 0, N, kInside},
        {{"--seed"}, 1, N, kText},
        {{"--generation-config"}, 1, N, kText},
        {{"--chat-template"}, 1, N, kText},
        {{"--enable-auto-tool-choice"}, 0, N, kText},
        {{"--tool-call-parser"}, 1, N, kText},
        {{"--reasoning-parser"}, 1, N, kText},
        {{"--max-logprobs"}, 1, N, kText},
        {{"--disable-log-requests", "--enable-log-requests"}, 0, N, kText},
        {{"--disable-log-stats"}, 0, N, kText},
        {{"--uvicorn-log-level"}, 1, N, kText},
        {{"--limit-mm-per-prompt"}, 1, N, kInside},
        {{"--speculative-config"},
         1,
         R,
         "a draft model is a second model inside vLLM's memory and plans; not planned"},
        {{"--enable-lora"}, 0, R, "LoRA adapters add weights loch does not plan"},
        {{"--lora-modules"}, 1, R, "LoRA adapters add weights loch does not plan"},
        {{"--ssl-keyfile"}, 1, R, "loch speaks plain HTTP to its engines on 127.0.0.1"},
        {{"--ssl-certfile"}, 1, R, "loch speaks plain HTTP to its engines on 127.0.0.1"},
        {{"--root-path"}, 1, R, "loch calls the engine's routes at their own paths"},
    }};

}  // namespace vllm_table

const FlagTable& vllm() {
    return vllm_table::kTable;
}

}  // namespace loch::engines::flags
