// Presets: the real shapes of popular models (from each model's config.json on Hugging Face, as
// convert_hf_to_gguf.py maps it to GGUF keys) and tiny CI-sized models of every architecture.
// published_params is the real text model's parameter count; tests hold build_model() to ±0.5% of it.
#include <algorithm>

#include "synth/synth.hpp"

namespace loch::synth {

namespace {

Shape llama(std::string name, std::uint32_t layers, std::uint32_t embd, std::uint32_t heads, std::uint32_t kv,
            std::uint32_t ff, std::uint32_t vocab, std::uint32_t ctx, float rope_base, float eps) {
    Shape s;
    s.arch = "llama";
    s.name = std::move(name);
    s.n_layer = layers;
    s.n_embd = embd;
    s.n_head = heads;
    s.n_head_kv = {kv};
    s.n_ff = ff;
    s.n_vocab = vocab;
    s.n_ctx_train = ctx;
    s.rope_freq_base = rope_base;
    s.norm_eps = eps;
    return s;
}

std::vector<Preset> make_presets() {
    std::vector<Preset> p;

    // --- real shapes -------------------------------------------------------------------------------
    p.push_back({"llama-3.1-8b", "Meta Llama 3.1 8B", "meta-llama/Llama-3.1-8B config.json",
                 llama("Llama-3.1-8B", 32, 4096, 32, 8, 14336, 128256, 131072, 500000.0f, 1e-5f),
                 8030261248ULL, "q4_k_m"});
    p.push_back({"llama-3.1-70b", "Meta Llama 3.1 70B", "meta-llama/Llama-3.1-70B config.json",
                 llama("Llama-3.1-70B", 80, 8192, 64, 8, 28672, 128256, 131072, 500000.0f, 1e-5f),
                 70553706496ULL, "q4_k_m"});
    p.push_back({"llama-2-13b", "Meta Llama 2 13B", "meta-llama/Llama-2-13b-hf config.json",
                 llama("Llama-2-13b", 40, 5120, 40, 40, 13824, 32000, 4096, 10000.0f, 1e-5f), 13015864320ULL,
                 "q4_k_m"});
    {
        Shape s =
            llama("Mistral-Small-24B-Base-2501", 40, 5120, 32, 8, 32768, 131072, 32768, 100000000.0f, 1e-5f);
        s.head_dim = 128;  // 32 heads of 128 = 4096 != n_embd 5120
        p.push_back({"mistral-small-24b", "Mistral Small 3 24B (2501)",
                     "mistralai/Mistral-Small-24B-Base-2501 config.json", s, 23572403200ULL, "q4_k_m"});
    }
    {
        // The text model of Mistral Small 3.2 (2506), which sd.cpp runs as Flux.2-dev's text encoder
        // (`--llm`): 3.1's shape with RoPE base 1e9 and 128k context; the vision tower is not part of it.
        Shape s = llama("Mistral-Small-3.2-24B-Instruct-2506", 40, 5120, 32, 8, 32768, 131072, 131072,
                        1000000000.0f, 1e-5f);
        s.head_dim = 128;
        p.push_back({"mistral-small-3.2-24b",
                     "Mistral Small 3.2 24B (2506) text model: Flux.2-dev's text encoder",
                     "mistralai/Mistral-Small-3.2-24B-Instruct-2506 config.json (text_config)", s,
                     23572403200ULL, "q4_k_m"});  // the Strix Halo story ran it at --quant q8_0
    }
    {
        Shape s = llama("Mixtral-8x7B-v0.1", 32, 4096, 32, 8, 14336, 32000, 32768, 1000000.0f, 1e-5f);
        s.n_expert = 8;
        s.n_expert_used = 2;
        p.push_back({"mixtral-8x7b", "Mistral Mixtral 8x7B (MoE, llama architecture)",
                     "mistralai/Mixtral-8x7B-v0.1 config.json", s, 46702792704ULL, "q4_k_m"});
    }
    auto qwen2 = [](std::string name, std::uint32_t layers, std::uint32_t embd, std::uint32_t heads,
                    std::uint32_t kv, std::uint32_t ff) {
        Shape s = llama(std::move(name), layers, embd, heads, kv, ff, 152064, 32768, 1000000.0f, 1e-6f);
        s.arch = "qwen2";
        s.attn_bias = true;
        return s;
    };
    p.push_back({"qwen2.5-7b", "Qwen2.5 7B", "Qwen/Qwen2.5-7B config.json",
                 qwen2("Qwen2.5-7B", 28, 3584, 28, 4, 18944), 7615616512ULL, "q4_k_m"});
    p.push_back({"qwen2.5-14b", "Qwen2.5 14B", "Qwen/Qwen2.5-14B config.json",
                 qwen2("Qwen2.5-14B", 48, 5120, 40, 8, 13824), 14770033664ULL, "q4_k_m"});
    p.push_back({"qwen2.5-32b", "Qwen2.5 32B", "Qwen/Qwen2.5-32B config.json",
                 qwen2("Qwen2.5-32B", 64, 5120, 40, 8, 27648), 32763876352ULL, "q4_k_m"});
    {
        Shape s = llama("Qwen3-8B", 36, 4096, 32, 8, 12288, 151936, 40960, 1000000.0f, 1e-6f);
        s.arch = "qwen3";
        s.head_dim = 128;
        p.push_back({"qwen3-8b", "Qwen3 8B", "Qwen/Qwen3-8B config.json", s, 8190735360ULL, "q4_k_m"});
    }
    {
        Shape s = llama("Qwen3-30B-A3B", 48, 2048, 32, 4, 6144, 151936, 40960, 1000000.0f, 1e-6f);
        s.arch = "qwen3moe";
        s.head_dim = 128;
        s.n_expert = 128;
        s.n_expert_used = 8;
        s.n_ff_expert = 768;
        p.push_back({"qwen3-30b-a3b", "Qwen3 30B-A3B (MoE, 128 experts, 8 active)",
                     "Qwen/Qwen3-30B-A3B config.json", s, 30532122624ULL, "q4_k_m"});
    }
    {
        Shape s = llama("Gemma-3-12B", 48, 3840, 16, 8, 15360, 262208, 131072, 1000000.0f, 1e-6f);
        s.arch = "gemma3";
        s.head_dim = 256;
        s.sliding_window = 1024;
        s.swa_pattern = 6;
        s.rope_freq_base_swa = 10000.0f;
        s.tied_embeddings = true;
        // 12.19 B with the 0.42 B SigLIP vision tower, which lives in a separate mmproj file in GGUF.
        p.push_back({"gemma-3-12b",
                     "Google Gemma 3 12B (text model; sliding window 1024, 5 local : 1 global)",
                     "google/gemma-3-12b-it config.json (text_config)", s, 11765788416ULL, "q4_k_m"});
    }
    {
        Shape s;
        s.arch = "deepseek2";
        s.name = "DeepSeek-V2-Lite";
        s.n_layer = 27;
        s.n_embd = 2048;
        s.n_head = 16;
        s.head_dim = 192;  // qk_nope 128 + qk_rope 64
        s.rope_dim = 64;
        s.v_head_dim = 128;
        s.kv_lora_rank = 512;
        s.q_lora_rank = 0;
        s.n_ff = 10944;
        s.n_expert = 64;
        s.n_expert_used = 6;
        s.n_ff_expert = 1408;
        s.n_expert_shared = 2;
        s.n_layer_dense_lead = 1;
        s.n_vocab = 102400;
        s.n_ctx_train = 163840;
        s.norm_eps = 1e-6f;
        s.rope_freq_base = 10000.0f;
        p.push_back({"deepseek-v2-lite", "DeepSeek-V2-Lite 16B (MLA, 64 experts, 6 active, 2 shared)",
                     "deepseek-ai/DeepSeek-V2-Lite config.json", s, 15706484224ULL, "q4_k_m"});
    }

    // --- demo: served by the README's first command -------------------------------------------------
    // Trained for 32k tokens: a coding agent's first request (Codex: an ~11k-token prompt; Claude Code:
    // max_tokens 32000) fits the slot the embedded default's `ctx: auto` gives it.
    p.push_back({"demo", "Small llama-architecture demo model (about 25 MB, loads in a second)", "synthetic",
                 llama("loch-demo", 8, 512, 8, 4, 1024, 4096, 32768, 10000.0f, 1e-5f), 0, "q8_0"});

    // --- tiny models of every architecture (CI) -------------------------------------------------------
    // Trained for 32k tokens, so that the suites' contexts (4096 to 32768) are within what the engine gives.
    p.push_back({"tiny-llama", "Tiny llama (CI)", "synthetic",
                 llama("tiny-llama", 2, 256, 4, 2, 512, 512, 32768, 10000.0f, 1e-5f), 0, "f16"});
    {
        Shape s = llama("tiny-mixtral", 2, 256, 4, 2, 256, 512, 32768, 10000.0f, 1e-5f);
        s.n_expert = 4;
        s.n_expert_used = 2;
        p.push_back({"tiny-mixtral", "Tiny llama MoE (Mixtral layout, CI)", "synthetic", s, 0, "f16"});
    }
    {
        Shape s = llama("tiny-qwen2", 2, 256, 4, 2, 512, 512, 32768, 1000000.0f, 1e-6f);
        s.arch = "qwen2";
        s.attn_bias = true;
        p.push_back({"tiny-qwen2", "Tiny qwen2 (CI)", "synthetic", s, 0, "f16"});
    }
    {
        // Flux.2-dev's text encoder in CI size: sd.cpp fixes Mistral's heads (32 of 128, 8 for K/V) and its
        // tokenizer (131072 ids), and reads the hidden states of layers 10, 20 and 30: 31 layers, width 256.
        Shape s = llama("tiny-mistral-te", 31, 256, 32, 8, 512, 131072, 4096, 1000000000.0f, 1e-5f);
        s.head_dim = 128;
        p.push_back({"tiny-mistral-te", "Tiny Mistral Small 3.2 layout as Flux.2's text encoder (CI)",
                     "synthetic", s, 0, "f16"});
    }
    {
        Shape s = llama("tiny-qwen3", 2, 256, 4, 2, 512, 512, 32768, 1000000.0f, 1e-6f);
        s.arch = "qwen3";
        s.head_dim = 128;  // Qwen3 decouples head_dim from n_embd / n_head
        p.push_back({"tiny-qwen3", "Tiny qwen3 (CI)", "synthetic", s, 0, "f16"});
    }
    {
        Shape s = llama("tiny-qwen3moe", 2, 256, 4, 2, 512, 512, 32768, 1000000.0f, 1e-6f);
        s.arch = "qwen3moe";
        s.head_dim = 64;
        s.n_expert = 8;
        s.n_expert_used = 2;
        s.n_ff_expert = 128;
        p.push_back({"tiny-qwen3moe", "Tiny qwen3moe (CI)", "synthetic", s, 0, "f16"});
    }
    {
        Shape s = llama("tiny-gemma3", 6, 256, 4, 2, 512, 512, 32768, 1000000.0f, 1e-6f);
        s.arch = "gemma3";
        s.head_dim = 64;
        s.sliding_window = 64;
        s.swa_pattern = 3;
        s.tied_embeddings = true;
        p.push_back({"tiny-gemma3", "Tiny gemma3 with sliding-window layers (CI)", "synthetic", s, 0, "f16"});
    }
    {
        Shape s;
        s.arch = "deepseek2";
        s.name = "tiny-deepseek2";
        s.n_layer = 2;
        s.n_embd = 256;
        s.n_head = 4;
        s.head_dim = 96;
        s.rope_dim = 32;
        s.v_head_dim = 64;
        s.kv_lora_rank = 128;
        s.q_lora_rank = 0;
        s.n_ff = 512;
        s.n_expert = 8;
        s.n_expert_used = 2;
        s.n_ff_expert = 128;
        s.n_expert_shared = 1;
        s.n_layer_dense_lead = 1;
        s.n_vocab = 512;
        s.n_ctx_train = 32768;
        s.norm_eps = 1e-6f;
        p.push_back({"tiny-deepseek2", "Tiny deepseek2 with latent attention (MLA) and shared experts (CI)",
                     "synthetic", s, 0, "f16"});
    }
    return p;
}

}  // namespace

const std::vector<Preset>& list_presets() {
    static const std::vector<Preset> kPresets = make_presets();
    return kPresets;
}

const Preset* find_preset(std::string_view name) {
    const auto& all = list_presets();
    const auto it = std::find_if(all.begin(), all.end(), [&](const Preset& p) { return p.name == name; });
    return it == all.end() ? nullptr : &*it;
}

}  // namespace loch::synth
