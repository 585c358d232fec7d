// `loch plan MODEL.gguf | --preset NAME [--quant Q] [settings] [--json] [--fit BYTES] [--dry-run]`:
// what the model takes on each device with these settings, every figure with its source. With --width /
// --height it plans one image generation instead (cli/plan_image.hpp).
#include <unistd.h>

#include <cstdio>
#include <filesystem>
#include <memory>
#include <optional>
#include <string>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "cli/commands.hpp"
#include "cli/plan_image.hpp"
#include "cli/text.hpp"
#include "gguf/reader.hpp"
#include "plan/dry_run.hpp"
#include "plan/plan.hpp"
#include "plan/reservation.hpp"
#include "synth/synth.hpp"

namespace loch::cli {
namespace {

struct PlanOptions {
    std::string file, preset, quant;
    std::uint32_t ctx = 4096, parallel = 1, ubatch = 512, batch = 2048, n_cpu_moe = 0;
    int ngl = -1;
    bool kv_unified = false, json = false, dry_run = false, swa_full = false, embedding = false,
         no_repack = false;
    std::string pooling;
    std::string flash_attn = "auto", type_k = "f16", type_v = "f16", device = "cpu", fit, fit_params_bin;
    std::vector<float> tensor_split;
    std::vector<std::string> override_tensor;
    std::vector<std::string> lora;  // adapter files (llama-server's --lora)
    std::string draft;              // a draft model (--spec-type draft-simple --spec-draft-model)
    std::uint32_t draft_max = plan::kDraftMaxDefault;
    double overhead_mib = 600, margin_pct = 0;
    ImagePlanOptions image;  // --width/--height: an image model (cmd_plan_image.cpp)
};

gguf::GgmlType cache_type(const std::string& name, const char* flag) {
    auto t = gguf::type_from_name(name);
    if (!t)
        throw std::runtime_error(
            fmt::format("{} '{}' is not a ggml type (f16, bf16, q8_0, q4_0, ...)", flag, name));
    return *t;
}

plan::Settings settings_from(const PlanOptions& o) {
    plan::Settings s;
    s.n_ctx = o.ctx;
    s.n_parallel = o.parallel;
    s.kv_unified = o.kv_unified;
    s.n_gpu_layers = o.ngl;
    s.tensor_split = o.tensor_split;
    s.n_cpu_moe = o.n_cpu_moe;
    for (const auto& p : o.override_tensor) {
        auto eq = p.rfind('=');
        if (eq == std::string::npos || p.substr(eq + 1) != "CPU")
            throw std::runtime_error(fmt::format("-ot '{}': only PATTERN=CPU is supported", p));
        s.cpu_tensor_patterns.push_back(p.substr(0, eq));
    }
    auto fa = plan::flash_attn_from_string(o.flash_attn);
    if (!fa) throw std::runtime_error(fmt::format("--flash-attn '{}': use on, off or auto", o.flash_attn));
    s.flash_attn = *fa;
    s.type_k = cache_type(o.type_k, "--cache-type-k");
    s.type_v = cache_type(o.type_v, "--cache-type-v");
    s.n_ubatch = o.ubatch;
    s.n_batch = o.batch;
    s.swa_full = o.swa_full;
    s.cpu_repack = !o.no_repack;
    s.embeddings = o.embedding;
    s.pooling = o.pooling;
    if (o.device != "cpu") {
        std::string rest = o.device;
        while (!rest.empty()) {
            auto c = rest.find(',');
            std::string d = rest.substr(0, c);
            if (d.empty() || d == "cpu" || d.size() > 32)
                throw std::runtime_error(
                    fmt::format("--device '{}': give cpu, or GPUs like cuda0,cuda1", o.device));
            s.gpus.push_back(d);
            rest = c == std::string::npos ? "" : rest.substr(c + 1);
        }
    }
    if (o.overhead_mib < 0 || o.margin_pct < 0 || o.margin_pct > 100)
        throw std::runtime_error("--overhead-mib must be >= 0 and --margin-pct within 0..100");
    s.gpu_overhead_bytes = static_cast<std::uint64_t>(o.overhead_mib * static_cast<double>(kMiB));
    s.margin_fraction = o.margin_pct / 100.0;
    return s;
}

void print_table(const plan::Plan& p) {
    std::printf("model: %s (%s), %u layers, vocab %u\n", p.model_name.c_str(), p.shape.arch.c_str(),
                p.shape.n_layer, p.shape.n_vocab);
    std::printf("context: n_ctx %u = %u stream(s) x %u cells%s, ubatch %u, flash attention %s, KV %s/%s\n",
                p.n_ctx, p.n_stream, p.n_ctx_seq,
                p.n_ctx_swa ? fmt::format(" (SWA layers: {} cells)", p.n_ctx_swa).c_str() : "", p.n_ubatch,
                p.flash_attn ? "on" : "off", std::string(gguf::traits(p.settings.type_k).name).c_str(),
                std::string(gguf::traits(p.settings.type_v).name).c_str());
    if (!p.settings.gpus.empty())
        std::printf("offloaded %d/%d layers\n", p.layers_offloaded, p.layers_offloadable);
    std::printf("\n%-8s %6s %11s %11s %11s %11s %11s %11s %11s\n", "device", "layers", "weights", "kv cache",
                "compute", "output", "overhead", "margin", "total");
    for (const auto& d : p.devices) {
        std::printf("%-8s %6u %11s %11s %11s %11s %11s %11s %11s\n", d.device.c_str(), d.layers,
                    mib_text(d.weights.bytes).c_str(), mib_text(d.kv.bytes).c_str(),
                    mib_text(d.compute.bytes).c_str(), mib_text(d.output.bytes).c_str(),
                    mib_text(d.overhead.bytes).c_str(), mib_text(d.margin.bytes).c_str(),
                    mib_text(d.total()).c_str());
    }
    std::printf(
        "(MiB; source: formula for weights, kv cache, compute, output; configured for overhead and "
        "margin)\n");
    for (const auto& d : p.devices)
        for (const auto* f : {&d.adapters, &d.draft})
            if (f->bytes > 0) std::printf("%-8s total includes %s\n", d.device.c_str(), f->detail.c_str());
    for (const auto& n : p.notes) std::printf("note: %s\n", n.c_str());
}

// The model as a file for the dry runs: the given GGUF, or a preset written once as a sparse file (zeros
// cost no disk) and removed when the command ends.
class ModelFile {
  public:
    ModelFile(const PlanOptions& o, const gguf::Model& model) : path_(o.file) {
        if (!path_.empty()) return;
        tmp_ = std::filesystem::temp_directory_path() /
               fmt::format("loch-plan-{}-{}.gguf", o.preset, ::getpid());
        synth::write_model(tmp_, model, synth::Weights::zeros);
        path_ = tmp_.string();
    }
    ~ModelFile() {
        std::error_code ec;
        if (!tmp_.empty()) std::filesystem::remove(tmp_, ec);
    }
    ModelFile(const ModelFile&) = delete;
    ModelFile& operator=(const ModelFile&) = delete;
    const std::string& path() const { return path_; }

  private:
    std::string path_;
    std::filesystem::path tmp_;
};

std::string default_fit_params_bin() {
    std::error_code ec;
    const auto self = std::filesystem::read_symlink("/proc/self/exe", ec);
    return plan::find_fit_params(ec ? std::filesystem::path() : self.parent_path());
}

void run_plan(const PlanOptions& o) {
    if (o.file.empty() == o.preset.empty())
        throw std::runtime_error("give a MODEL.gguf or --preset NAME (one of them)");
    gguf::Model model;
    if (!o.preset.empty()) {
        const synth::Preset* pr = synth::find_preset(o.preset);
        if (!pr) {
            std::string names;
            for (const auto& x : synth::list_presets()) names += (names.empty() ? "" : ", ") + x.name;
            throw std::runtime_error(fmt::format("unknown preset '{}' (known: {})", o.preset, names));
        }
        model = synth::build_model(pr->shape, o.quant.empty() ? pr->default_quant : o.quant);
    } else {
        model = gguf::read_model(o.file);
    }
    plan::Settings st = settings_from(o);
    for (const auto& f : o.lora) {
        try {
            const auto adapter = plan::read_lora(gguf::read_model(f), model);
            st.lora.insert(st.lora.end(), adapter.pairs.begin(), adapter.pairs.end());
        } catch (const std::exception& e) {
            throw std::runtime_error(fmt::format("--lora {}: {}", f, e.what()));
        }
    }
    if (!o.draft.empty()) {
        try {
            st.draft = plan::read_draft(o.draft, model, o.draft_max);
        } catch (const std::exception& e) {
            throw std::runtime_error(fmt::format("--draft {}: {}", o.draft, e.what()));
        }
    }
    const plan::Plan p = plan::make_plan(model, st);

    if (!o.json) print_table(p);
    nlohmann::json out = p;
    std::optional<ModelFile> file;
    if (o.dry_run) file.emplace(o, model);
    auto dry_run_at = [&](plan::Settings at) {
        at.draft.reset();  // a server flag: llama-fit-params plans the model alone
        return plan::run_fit_params(o.fit_params_bin.empty() ? default_fit_params_bin() : o.fit_params_bin,
                                    file->path(), plan::engine_args(at));
    };
    if (o.dry_run) {
        const auto dr = dry_run_at(st);
        nlohmann::json jd = nlohmann::json::array();
        for (const auto& d : dr.devices)
            jd.push_back({{"device", d.device},
                          {"name", d.name},
                          {"model", d.model},
                          {"context", d.context},
                          {"compute", d.compute},
                          {"total_bytes", d.total()}});
        out["engine_dry_run"] = jd;
        out["reservation_rule"] =
            "the broker reserves the larger of loch's plan and the dry run + what it leaves out (the GPU "
            "context; on the CPU the resident mapped and repacked weights)";
        if (!o.json) {
            std::printf("\nengine dry run (llama-fit-params, whole MiB):\n");
            for (const auto& d : dr.devices)
                std::printf("%-8s model %s  context %s  compute %s  total %s\n", d.device.c_str(),
                            mib_text(d.model.bytes).c_str(), mib_text(d.context.bytes).c_str(),
                            mib_text(d.compute.bytes).c_str(), mib_text(d.total()).c_str());
        }
    }
    if (!o.fit.empty()) {
        auto budget = plan::parse_bytes(o.fit);
        if (!budget)
            throw std::runtime_error(
                fmt::format("--fit '{}' is not a size (24GiB, 512MiB, 8000000000)", o.fit));
        const std::string dev = st.gpus.empty() ? "cpu" : st.gpus.front();
        // An answer is one whose reservation fits: the plan, and with --dry-run also the dry run plus what
        // it leaves out (the broker's rule), each re-computed at exactly the answer's settings.
        auto reservation = [&](const plan::Settings& at) {
            const auto pa = plan::make_plan(model, at);
            const auto* d = pa.find(dev);
            std::uint64_t r = d ? d->total() : 0;
            if (o.dry_run)
                r = std::max(r, plan::dry_run_candidate(dry_run_at(at), dev == "cpu", d,
                                                        plan::dry_run_excess(model, at, dev))
                                    .bytes());
            return r;
        };
        nlohmann::json f = {{"device", dev},
                            {"budget_bytes", *budget},
                            {"checked_by", o.dry_run ? "loch plan and the engine dry run" : "loch plan"}};
        // Largest context with every layer there: the formula's answer, stepped down by what the dry run
        // adds beyond the budget (a few tries; each is one dry run).
        std::optional<std::uint32_t> ctx;
        std::uint64_t ctx_res = 0;
        {
            std::uint64_t formula_budget = *budget;
            for (int attempt = 0; attempt < 6; ++attempt) {
                ctx = plan::max_context(model, st, dev, formula_budget);
                if (!ctx) break;
                auto at = st;
                at.n_ctx = *ctx;
                if (dev != "cpu") at.n_gpu_layers = -1;
                ctx_res = reservation(at);
                if (ctx_res <= *budget) break;
                const std::uint64_t excess = ctx_res - *budget;
                formula_budget = formula_budget > excess ? formula_budget - excess : 0;
                ctx.reset();
            }
        }
        f["max_context_full_offload"] = ctx ? nlohmann::json(*ctx) : nlohmann::json(nullptr);
        if (ctx) {
            f["max_context_reservation_bytes"] = ctx_res;
            f["max_context_headroom_bytes"] = *budget - ctx_res;
        }
        int ngl = 0;
        std::uint64_t ngl_res = 0;
        if (!st.gpus.empty()) {
            ngl = plan::max_gpu_layers(model, st, *budget);
            for (; ngl > 0; --ngl) {
                auto at = st;
                at.n_gpu_layers = ngl;
                ngl_res = reservation(at);
                if (ngl_res <= *budget) break;
            }
            f["max_gpu_layers_at_ctx"] = ngl;
            f["max_gpu_layers_reservation_bytes"] = ngl_res;
            f["max_gpu_layers_headroom_bytes"] = *budget - std::min(*budget, ngl_res);
        }
        out["fit"] = f;
        if (!o.json) {
            std::printf("\nfit in %s MiB on %s (checked by %s):\n", mib_text(*budget).c_str(), dev.c_str(),
                        o.dry_run ? "loch plan and the engine dry run" : "loch plan");
            if (ctx)
                std::printf(
                    "  largest context with every layer there: %u%s\n    reservation %s MiB, headroom %s "
                    "MiB\n",
                    *ctx,
                    *ctx >= p.shape.n_ctx_train ? " (the model's training context; more is not tried)" : "",
                    mib_text(ctx_res).c_str(), mib_text(*budget - ctx_res).c_str());
            else
                std::printf("  not even a 256-token context fits with every layer there\n");
            if (!st.gpus.empty())
                std::printf(
                    "  most layers there at -c %u: %d of %u (-ngl)\n    reservation %s MiB, headroom %s "
                    "MiB\n",
                    st.n_ctx, ngl, p.shape.n_layer + 1, mib_text(ngl_res).c_str(),
                    mib_text(*budget - std::min(*budget, ngl_res)).c_str());
        }
    }
    if (o.json) std::printf("%s\n", pretty_json(out).c_str());
}

}  // namespace

void add_plan_command(CLI::App& app) {
    auto o = std::make_shared<PlanOptions>();
    auto* cmd = app.add_subcommand(
        "plan", "Memory plan per device for a model and settings, before starting anything");
    cmd->add_option("model", o->file, "GGUF file");
    cmd->add_option("--preset", o->preset,
                    "plan a loch-synth preset shape instead of a file (e.g. llama-3.1-70b)");
    cmd->add_option("--quant", o->quant, "quantization for --preset (q4_k_m, q8_0, f16, ...)");
    cmd->add_option("-c,--ctx", o->ctx, "context size (0 = the model's training context)")
        ->check(CLI::Range(0u, 1u << 24));
    cmd->add_option("--parallel", o->parallel, "parallel slots (sequences)")->check(CLI::Range(1u, 4096u));
    cmd->add_flag("--kv-unified", o->kv_unified, "one KV stream shared by all slots");
    cmd->add_option("--ngl", o->ngl, "layers on the GPU(s); negative = all")->check(CLI::Range(-1, 100000));
    cmd->add_option("--tensor-split", o->tensor_split, "split weights between GPUs")->delimiter(',');
    cmd->add_option("--n-cpu-moe", o->n_cpu_moe, "keep the experts of the first N layers on the CPU")
        ->check(CLI::Range(0u, 100000u));
    cmd->add_option("--override-tensor", o->override_tensor, "PATTERN=CPU: keep matching tensors on the CPU");
    cmd->add_option("--flash-attn", o->flash_attn, "on | off | auto");
    cmd->add_option("--cache-type-k", o->type_k, "K cache type (f16, bf16, q8_0, q4_0, ...)");
    cmd->add_option("--cache-type-v", o->type_v, "V cache type");
    cmd->add_option("--ubatch", o->ubatch, "physical batch size")->check(CLI::Range(1u, 1u << 20));
    cmd->add_option("-b,--batch", o->batch, "logical batch size")->check(CLI::Range(1u, 1u << 24));
    cmd->add_flag("--swa-full", o->swa_full, "full-size cache for sliding-window layers");
    cmd->add_flag("--no-repack", o->no_repack,
                  "CPU weights without the repacked copy (llama-server's --no-repack)");
    cmd->add_option("--lora", o->lora, "LoRA adapter files (llama-server's --lora), planned as applied");
    cmd->add_option(
        "--draft", o->draft,
        "A draft model for speculative decoding (llama-server's --spec-draft-model), planned beside "
        "the model");
    cmd->add_option("--draft-max", o->draft_max, "Tokens drafted per slot per step (--spec-draft-n-max)")
        ->check(CLI::Range(1, 64));
    cmd->add_flag("--embedding", o->embedding, "an embedding server: every token of a batch is an output");
    cmd->add_option("--pooling", o->pooling, "embedding pooling: none, mean, cls, last, rank")
        ->check(CLI::IsMember({"none", "mean", "cls", "last", "rank"}));
    cmd->add_option("--device", o->device, "cpu, or GPUs: cuda0[,cuda1...]");
    cmd->add_option("--overhead-mib", o->overhead_mib, "fixed per-GPU overhead (CUDA context), MiB")
        ->check(CLI::Range(0.0, 1048576.0));
    cmd->add_option("--margin-pct", o->margin_pct, "margin on top of each device, percent")
        ->check(CLI::Range(0.0, 100.0));
    cmd->add_option("--fit", o->fit, "what fits in this much (24GiB, 512MiB, bytes)");
    cmd->add_flag("--dry-run", o->dry_run, "also run the engine's dry run (llama-fit-params)");
    cmd->add_option("--fit-params-bin", o->fit_params_bin,
                    "llama-fit-params binary (default: next to loch, then PATH)");
    cmd->add_flag("--json", o->json, "machine-readable output");
    add_image_plan_options(*cmd, o->image);
    cmd->callback([o] {
        if (is_image_plan(o->image))
            run_image_plan(o->image, o->file, o->device, o->fit, o->json);
        else
            run_plan(*o);
    });
}

}  // namespace loch::cli
