// loch-synth — writes synthetic GGUF models (real architectures, generated weights) for tests and benchmarks.
//
//   loch-synth --list-presets
//   loch-synth --preset llama-3.1-8b [--quant q4_k_m] [--weights zeros|small] --out FILE
//   loch-synth --arch qwen3 --layers 4 --embd 512 --heads 8 --kv-heads 2 --ff 1024 --vocab 1000 --ctx 4096
//              [--type q8_0] --out FILE
//   loch-synth --diffusion flux-tiny|flux2-dev|flux2-vae|clip-l|taef1|… [--type q8_0] --out FILE  (sd-server)
//   loch-synth --whisper whisper-base [--type q8_0] [--no-tensors] --out FILE  (whisper.cpp's format)
//   loch-synth --mmproj llava-1.5|llava-tiny --text-embd N [--image-size N] [--layers …] --out FILE
//              (llama-server's --mmproj: a vision projector for a language model N wide)
//   loch-synth --lora-of MODEL.gguf --rank N [--lora-targets attn_q,attn_v,…] [--type f16] --out FILE
//              (llama-server's --lora: an adapter for that model)
// With --preset, any dimension option overrides the preset's value.
#include <cstdio>
#include <optional>
#include <string>

#include <fmt/format.h>
#include <fmt/ranges.h>
#include <CLI/CLI.hpp>

#include "gguf/reader.hpp"
#include "synth/diffusion.hpp"
#include "synth/lora.hpp"
#include "synth/projector.hpp"
#include "synth/synth.hpp"
#include "synth/whisper.hpp"

namespace {

using loch::synth::Shape;

std::string human_bytes(std::uint64_t b) {
    const char* units[] = {"B", "KiB", "MiB", "GiB", "TiB"};
    double v = static_cast<double>(b);
    int u = 0;
    while (v >= 1024.0 && u < 4) {
        v /= 1024.0;
        ++u;
    }
    return fmt::format("{:.1f} {}", v, units[u]);
}

int list_presets() {
    fmt::print("{:<18} {:>9} {:>8}  {}\n", "PRESET", "PARAMS", "QUANT", "DESCRIPTION");
    for (const auto& p : loch::synth::list_presets()) {
        const auto model = loch::synth::build_model(p.shape, "f16");
        fmt::print("{:<18} {:>8.2f}B {:>8}  {}\n", p.name, static_cast<double>(model.parameter_count()) / 1e9,
                   p.default_quant, p.description);
    }
    fmt::print("\n{:<18} {:>9} {:>8}  {}\n", "DIFFUSION", "PARAMS", "", "DESCRIPTION (--diffusion NAME)");
    for (const auto& p : loch::synth::diffusion_presets()) {
        const auto model = loch::synth::build_diffusion(p);
        fmt::print("{:<18} {:>8.3f}B {:>8}  {}\n", p.name, static_cast<double>(model.parameter_count()) / 1e9,
                   "f16", p.description);
    }
    fmt::print("\n{:<18} {:>9}  {}\n", "MMPROJ", "PARAMS", "DESCRIPTION (--mmproj NAME --text-embd N)");
    for (const auto& p : loch::synth::projector_presets())
        fmt::print("{:<18} {:>8.3f}B  {}\n", p.name,
                   static_cast<double>(loch::synth::build_projector(p.shape).parameter_count()) / 1e9,
                   p.description);
    fmt::print("\n{:<24} {:>9}  {}\n", "WHISPER", "PARAMS", "DESCRIPTION (--whisper NAME)");
    for (const auto& p : loch::synth::whisper_presets())
        fmt::print("{:<24} {:>8.3f}B  {}\n", p.name,
                   static_cast<double>(loch::synth::whisper_parameters(p.hp)) / 1e9, p.description);
    fmt::print("\nquantizations: ");
    bool first = true;
    for (const auto& q : loch::synth::quant_names()) {
        fmt::print("{}{}", first ? "" : ", ", q);
        first = false;
    }
    fmt::print("\n");
    return 0;
}

}  // namespace

int main(int argc, char** argv) {
    CLI::App app{
        "loch-synth: write a synthetic GGUF model that the pinned llama-server loads and answers from"};
    bool list = false;
    std::string preset, quant, weights, out;
    Shape s;
    std::optional<std::string> arch, name;
    std::optional<std::uint32_t> layers, embd, heads, head_dim, ff, vocab, ctx, experts, experts_used,
        expert_ff, shared_experts, dense_lead, sliding_window, swa_pattern, q_lora, kv_lora, rope_dim,
        v_head_dim;
    std::vector<std::uint32_t> kv_heads;
    std::optional<float> rope_base, norm_eps;
    bool tied = false, attn_bias = false;

    app.add_flag("--list-presets", list, "List presets and quantizations, then exit");
    std::string diffusion, whisper, mmproj, lora_of;
    std::uint32_t lora_rank = 16;
    std::vector<std::string> lora_targets{"attn_q", "attn_k", "attn_v", "attn_output"};
    app.add_option("--lora-of", lora_of, "Write a LoRA adapter (llama-server's --lora) for this model file");
    app.add_option("--rank", lora_rank, "--lora-of: the adapter's rank");
    app.add_option(
           "--lora-targets", lora_targets,
           "--lora-of: which weights to adapt (attn_q attn_k attn_v attn_output ffn_gate ffn_up ffn_down "
           "output token_embd)")
        ->delimiter(',');
    std::optional<std::uint32_t> text_embd, image_size;
    bool no_tensors = false;
    app.add_option("--mmproj", mmproj,
                   "A vision projector for llama-server's --mmproj: llava-1.5, llava-tiny (--layers, --embd, "
                   "--heads, --ff override its tower)");
    app.add_option("--text-embd", text_embd, "--mmproj: the language model's embedding width");
    app.add_option("--image-size", image_size, "--mmproj: the image side in pixels");
    app.add_option("--whisper", whisper, "Write a whisper.cpp model of a preset shape (see --list-presets)");
    app.add_flag("--no-tensors", no_tensors,
                 "--whisper: write no tensors (whisper.cpp allocates the weights without reading them)");
    app.add_option("--diffusion", diffusion,
                   "An sd-server model file (see --list-presets: flux-tiny, flux1-dev, flux2-dev, flux2-vae, "
                   "clip-l, taef1, ...)");
    app.add_option("--preset", preset, "Start from a preset (see --list-presets)");
    app.add_option("--quant,--type", quant,
                   "Quantization: a llama.cpp file type (q4_k_m, q8_0, f16, ...) or a tensor type");
    app.add_option(
        "--weights", weights,
        "zeros (sparse file), small (deterministic values) or brief (small, and answers end after a "
        "few sampled tokens: the demo's); default: zeros above 1 GB, brief for the demo");
    app.add_option("--out,-o", out, "Output GGUF file");
    app.add_option("--arch", arch, "Architecture: llama, qwen2, qwen3, qwen3moe, gemma3, deepseek2");
    app.add_option("--name", name, "general.name");
    app.add_option("--layers", layers, "Number of layers (block_count)");
    app.add_option("--embd", embd, "Embedding width (embedding_length)");
    app.add_option("--heads", heads, "Attention heads");
    app.add_option("--kv-heads", kv_heads, "KV heads: one value, or one per layer (comma separated)")
        ->delimiter(',');
    app.add_option("--head-dim", head_dim, "Head size (default embd / heads; deepseek2: qk_nope + qk_rope)");
    app.add_option("--ff", ff, "Feed-forward width");
    app.add_option("--vocab", vocab, "Vocabulary size (>= 259)");
    app.add_option("--ctx", ctx, "Training context length");
    app.add_option("--experts", experts, "Number of experts (MoE)");
    app.add_option("--experts-used", experts_used, "Experts used per token");
    app.add_option("--expert-ff", expert_ff, "Expert feed-forward width (qwen3moe, deepseek2)");
    app.add_option("--shared-experts", shared_experts, "Shared experts (deepseek2)");
    app.add_option("--dense-lead", dense_lead, "Leading dense layers (deepseek2)");
    app.add_option("--sliding-window", sliding_window, "Sliding window size (gemma3)");
    app.add_option("--swa-pattern", swa_pattern, "Every N-th layer is global (gemma3)");
    app.add_option("--q-lora-rank", q_lora, "Query LoRA rank, 0 = plain wq (deepseek2)");
    app.add_option("--kv-lora-rank", kv_lora, "KV latent rank (deepseek2)");
    app.add_option("--rope-dim", rope_dim, "Rotary dimensions per head (deepseek2)");
    app.add_option("--v-head-dim", v_head_dim, "Value head size (deepseek2)");
    app.add_option("--rope-base", rope_base, "RoPE frequency base");
    app.add_option("--norm-eps", norm_eps, "RMS norm epsilon");
    app.add_flag("--tied", tied, "Tie output to the token embedding (no output.weight)");
    app.add_flag("--attn-bias", attn_bias, "q/k/v biases (qwen2)");
    CLI11_PARSE(app, argc, argv);

    try {
        if (list) return list_presets();
        if (out.empty()) throw loch::synth::SynthError("--out FILE is required");

        if (!lora_of.empty()) {
            const auto base = loch::gguf::read_model(lora_of);
            const auto type = loch::gguf::type_from_name(quant.empty() ? "f16" : quant);
            if (!type) throw loch::synth::SynthError(fmt::format("unknown tensor type '{}'", quant));
            const auto model = loch::synth::build_lora(base, lora_rank, lora_targets, *type);
            const auto size = loch::synth::write_model(out, model, loch::synth::Weights::zeros);
            fmt::print("{}: LoRA rank {} for {} ({}), {} tensors, {} ({} bytes), zero weights\n", out,
                       lora_rank, lora_of, fmt::join(lora_targets, ","), model.tensors.size(),
                       human_bytes(size), size);
            return 0;
        }
        if (!whisper.empty()) {
            const auto* p = loch::synth::find_whisper_preset(whisper);
            if (!p)
                throw loch::synth::SynthError(
                    fmt::format("unknown whisper preset '{}' (see --list-presets)", whisper));
            auto hp = p->hp;
            const auto type = loch::gguf::type_from_name(quant.empty() ? "f16" : quant);
            const auto ftype = type ? loch::gguf::whisper_ftype_of(*type) : std::nullopt;
            if (!ftype)
                throw loch::synth::SynthError(fmt::format("whisper.cpp has no ftype for '{}'", quant));
            hp.ftype = *ftype;
            const auto size = loch::gguf::write_whisper(out, hp, !no_tensors);
            fmt::print("{}: {}, {:.3f} B params, {} ({} bytes), {}\n", out, p->name,
                       static_cast<double>(loch::synth::whisper_parameters(hp)) / 1e9, human_bytes(size),
                       size, no_tensors ? "no tensors" : "zero weights");
            return 0;
        }
        if (!mmproj.empty()) {
            const auto* p = loch::synth::find_projector_preset(mmproj);
            if (!p)
                throw loch::synth::SynthError(
                    fmt::format("unknown projector preset '{}' (see --list-presets)", mmproj));
            auto shape = p->shape;
            for (auto [field, v] : {std::pair{&shape.n_layer, layers},
                                    {&shape.n_embd, embd},
                                    {&shape.n_head, heads},
                                    {&shape.n_ff, ff},
                                    {&shape.text_embd, text_embd},
                                    {&shape.image_size, image_size}})
                if (v) *field = *v;
            const auto type = loch::gguf::type_from_name(quant.empty() ? "f16" : quant);
            if (!type) throw loch::synth::SynthError(fmt::format("unknown tensor type '{}'", quant));
            const auto model = loch::synth::build_projector(shape, *type);
            const auto size = loch::synth::write_model(out, model, loch::synth::Weights::zeros);
            fmt::print("{}: {} projector, {} image tokens, {:.3f} B params, {} ({} bytes), zero weights\n",
                       out, p->name, shape.patches(), static_cast<double>(model.parameter_count()) / 1e9,
                       human_bytes(size), size);
            return 0;
        }
        if (!diffusion.empty()) {
            const auto* p = loch::synth::find_diffusion_preset(diffusion);
            if (!p)
                throw loch::synth::SynthError(
                    fmt::format("unknown diffusion preset '{}' (see --list-presets)", diffusion));
            const auto type = loch::gguf::type_from_name(quant.empty() ? "f16" : quant);
            if (!type) throw loch::synth::SynthError(fmt::format("unknown tensor type '{}'", quant));
            const auto model = loch::synth::build_diffusion(*p, *type);
            const auto size = loch::synth::write_model(out, model, loch::synth::Weights::zeros);
            fmt::print("{}: {}, {:.3f} B params, {} tensors, {} ({} bytes), zero weights\n", out, p->name,
                       static_cast<double>(model.parameter_count()) / 1e9, model.tensors.size(),
                       human_bytes(size), size);
            return 0;
        }
        std::string default_quant = "f16";
        if (!preset.empty()) {
            const auto* p = loch::synth::find_preset(preset);
            if (!p)
                throw loch::synth::SynthError(
                    fmt::format("unknown preset '{}' (see --list-presets)", preset));
            s = p->shape;
            default_quant = p->default_quant;
        } else if (!arch) {
            throw loch::synth::SynthError("give --preset NAME or --arch A with the dimensions (see --help)");
        }
        if (arch) s.arch = *arch;
        if (name) s.name = *name;
        auto set = [](std::uint32_t& field, const std::optional<std::uint32_t>& v) {
            if (v) field = *v;
        };
        set(s.n_layer, layers);
        set(s.n_embd, embd);
        set(s.n_head, heads);
        set(s.head_dim, head_dim);
        set(s.n_ff, ff);
        set(s.n_vocab, vocab);
        set(s.n_ctx_train, ctx);
        set(s.n_expert, experts);
        set(s.n_expert_used, experts_used);
        set(s.n_ff_expert, expert_ff);
        set(s.n_expert_shared, shared_experts);
        set(s.n_layer_dense_lead, dense_lead);
        set(s.sliding_window, sliding_window);
        set(s.swa_pattern, swa_pattern);
        set(s.q_lora_rank, q_lora);
        set(s.kv_lora_rank, kv_lora);
        set(s.rope_dim, rope_dim);
        set(s.v_head_dim, v_head_dim);
        if (!kv_heads.empty()) s.n_head_kv = kv_heads;
        if (rope_base) s.rope_freq_base = *rope_base;
        if (norm_eps) s.norm_eps = *norm_eps;
        if (tied) s.tied_embeddings = true;
        if (attn_bias) s.attn_bias = true;
        if (!preset.empty() && s.n_ctx_train == 0) s.n_ctx_train = 4096;

        const auto model = loch::synth::build_model(s, quant.empty() ? default_quant : quant);
        const auto w = weights.empty() ? loch::synth::default_weights(model, preset)
                                       : loch::synth::parse_weights(weights);
        const auto size = loch::synth::write_model(out, model, w);
        fmt::print("{}: {} {} layers, {:.3f} B params, {} tensors, {} ({} bytes), weights {}\n", out, s.arch,
                   s.n_layer, static_cast<double>(model.parameter_count()) / 1e9, model.tensors.size(),
                   human_bytes(size), size,
                   w == loch::synth::Weights::zeros   ? "zeros"
                   : w == loch::synth::Weights::brief ? "brief"
                                                      : "small");
        return 0;
    } catch (const loch::synth::SynthError& e) {
        std::fprintf(stderr, "loch-synth: %s\n", e.what());
        return 2;
    } catch (const std::exception& e) {
        std::fprintf(stderr, "loch-synth: %s\n", e.what());
        return 1;
    }
}
