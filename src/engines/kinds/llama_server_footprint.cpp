// The llama-server kind's footprint: loch's planner and the engine's dry run, by the reservation rule
// (engines/kinds/llama_server.hpp).
#include <algorithm>
#include <cctype>
#include <fstream>
#include <map>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include <boost/asio/use_awaitable.hpp>

#include "core/file_identity.hpp"
#include "engines/kinds/llama_server.hpp"
#include "engines/process.hpp"
#include "gguf/reader.hpp"
#include "plan/dry_run.hpp"
#include "plan/reservation.hpp"

namespace loch::engines {

namespace asio = boost::asio;

namespace {

// Runs llama-fit-params as a supervised child process and returns its output once it exits.
asio::awaitable<std::optional<std::string>> run_async(asio::any_io_executor ex, std::vector<std::string> argv,
                                                      std::map<std::string, std::string> env,
                                                      std::chrono::milliseconds timeout, std::string* why) {
    SpawnSpec spec;
    spec.argv = std::move(argv);
    spec.env_add = std::move(env);
    spec.ring_lines = 5000;
    std::unique_ptr<Process> proc;
    try {
        proc = Process::spawn(ex, spec);
    } catch (const std::exception& e) {
        *why = e.what();
        co_return std::nullopt;
    }
    if (!co_await proc->async_wait_for(timeout)) {
        *why = "timed out after " + std::to_string(timeout.count()) + " ms";
        co_return std::nullopt;  // the destructor kills the group
    }
    std::string out;
    for (const auto& l : proc->output_tail(spec.ring_lines)) out += l + "\n";
    const int st = proc->wait_status().value_or(-1);
    if (st != 0) {
        *why = "exit status " + std::to_string(st) + ": " +
               (out.size() > 400 ? out.substr(out.size() - 400) : out);
        co_return std::nullopt;
    }
    co_return out;
}

}  // namespace

namespace {

std::optional<gguf::GgmlType> cache_type(const std::optional<std::string>& name) {
    if (!name) return gguf::GgmlType::F16;
    return gguf::type_from_name(*name);
}

// The planner's figures for `device`: the device's total, and (CPU) what a dry run does not count.
struct Planned {
    MemoryFigure total;
    std::uint64_t weights = 0, kv = 0;
    std::uint32_t layers = 0;
    // On a GPU with work left on the CPU (layers beyond -ngl, experts or tensors kept there): what the
    // plan puts in host RAM — the CPU layers' mapped weights, their repacked copy, their KV, the CPU
    // compute and output buffers. 0 when everything is on the GPU (then the host holds only the token
    // embeddings' mapped rows it reads and small buffers).
    std::uint64_t host = 0;
    std::string host_detail;
};

// The plan's figures for the device the plan was made for (llama_plan_settings(model, where)).
const plan::DevicePlan* device_plan(const plan::Plan& p, const Placement& where) {
    if (where.backend == "cpu") return p.find("cpu");
    return p.settings.gpus.empty() ? nullptr : p.find(p.settings.gpus.front());
}

std::optional<Planned> planned_for(const gguf::Model& m, const config::ModelConfig& model,
                                   const Placement& where, std::string* why) {
    try {
        const plan::Plan p = plan::make_plan(m, llama_plan_settings(model, where));
        const plan::DevicePlan* dp = device_plan(p, where);
        if (!dp) return std::nullopt;
        Planned out;
        out.total = {dp->total(), Source::formula,
                     fmt::format("loch plan: weights {} + repack {} + KV {} + compute {} + output {} + "
                                 "overhead {}{}{}",
                                 human_bytes(dp->weights.bytes), human_bytes(dp->repack.bytes),
                                 human_bytes(dp->kv.bytes), human_bytes(dp->compute.bytes),
                                 human_bytes(dp->output.bytes), human_bytes(dp->overhead.bytes),
                                 dp->adapters.bytes ? " + " + dp->adapters.detail : std::string(),
                                 dp->draft.bytes ? " + " + dp->draft.detail : std::string())};
        out.weights = dp->weights.bytes + dp->repack.bytes;
        out.kv = dp->kv.bytes;
        out.layers = p.shape.n_layer;
        // (LoRA pairs of host tensors, and the host buffer every adapter tensor is read through, are host
        // RAM too; so are a draft model's samplers, outputs and mapped token embeddings.)
        const auto* cpu = p.find("cpu");
        const bool tensors_on_cpu = p.settings.n_cpu_moe > 0 || !p.settings.cpu_tensor_patterns.empty() ||
                                    (cpu && (cpu->adapters.bytes > 0 || cpu->draft.bytes > 0));
        if (cpu && where.backend != "cpu" && (p.layers_offloaded < p.layers_offloadable || tensors_on_cpu)) {
            out.host = cpu->total();
            out.host_detail = fmt::format(
                "{} of {} layers on the GPU{}: in host RAM weights {} + repack {} + KV {} + compute {} + "
                "output {}",
                p.layers_offloaded, p.layers_offloadable, tensors_on_cpu ? ", tensors kept on the CPU" : "",
                human_bytes(cpu->weights.bytes), human_bytes(cpu->repack.bytes), human_bytes(cpu->kv.bytes),
                human_bytes(cpu->compute.bytes), human_bytes(cpu->output.bytes));
        }
        return out;
    } catch (const std::exception& e) {
        *why = e.what();
        return std::nullopt;
    }
}

std::uint64_t file_size_or_zero(const std::filesystem::path& p) {
    std::error_code ec;
    const auto size = p.empty() ? 0 : std::filesystem::file_size(p, ec);
    return ec ? 0 : size;
}

// The cache: the same file, flags and engine build give the same answer.
asio::awaitable<std::optional<std::string>> cached_dry_run(const EstimateContext& ctx,
                                                           const std::filesystem::path& fit_params,
                                                           const std::vector<std::string>& argv,
                                                           const std::map<std::string, std::string>& env,
                                                           std::string* why) {
    std::string key;
    for (const auto& a : argv) key += a + '\x1f';
    for (const auto& [k, v] : env) key += k + '=' + v + '\x1f';  // which devices it saw
    key += file_identity(fit_params);
    for (std::size_t i = 0; i + 1 < argv.size(); ++i)
        if (argv[i] == "-m") key += "|" + file_identity(argv[i + 1]);
    nlohmann::json cache = nlohmann::json::object();
    if (!ctx.cache_file.empty()) {
        std::ifstream in(ctx.cache_file);
        cache = nlohmann::json::parse(in, nullptr, false);
        if (!cache.is_object()) cache = nlohmann::json::object();
        if (auto it = cache.find(key); it != cache.end() && it->is_string()) co_return it->get<std::string>();
    }
    auto out = co_await run_async(ctx.ex, argv, env, std::chrono::seconds(120), why);
    if (out && !ctx.cache_file.empty()) {
        cache[key] = *out;
        std::error_code ec;
        std::filesystem::create_directories(ctx.cache_file.parent_path(), ec);
        const auto tmp = ctx.cache_file.string() + ".tmp";
        std::ofstream(tmp) << cache.dump();
        std::filesystem::rename(tmp, ctx.cache_file, ec);
    }
    co_return out;
}

// The projector on the engine's main device: its weights, its image encoder's compute buffer (without flash
// attention unless it is on: auto may fall back), and on a GPU ggml-cuda's pool beside it.
std::uint64_t projector_bytes(const plan::ProjectorPlan& p, const config::ModelConfig& model,
                              const Placement& where) {
    const auto fa = llama_args(model).flash_attn;
    return p.bytes(where.backend != "cpu", fa == FlashAttn::on    ? std::optional<bool>(true)
                                           : fa == FlashAttn::off ? std::optional<bool>(false)
                                                                  : std::nullopt);
}

std::string projector_why(const plan::ProjectorPlan& p, std::uint64_t bytes) {
    return fmt::format(" + projector {} (weights {}, image encoder {} at {}², {} tokens per image)",
                       human_bytes(bytes), human_bytes(p.weights), human_bytes(bytes - p.weights),
                       p.image_size, p.image_tokens);
}

}  // namespace

plan::Settings llama_plan_settings(const config::ModelConfig& model, const Placement& where) {
    const auto& a = llama_args(model);
    plan::Settings s;
    s.n_ctx = a.ctx;
    s.n_parallel = std::max<std::uint32_t>(1, a.parallel);
    if (where.backend != "cpu") {
        for (const auto& name : llama_devices(where)) {
            std::string low;
            for (char c : name) low += static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
            s.gpus.push_back(low);
        }
        s.tensor_split = where.shares;  // a split: the layers in the placement's shares
        s.n_gpu_layers = a.n_gpu_layers.value_or(kAllLayers);
    } else {
        s.n_gpu_layers = 0;
    }
    s.flash_attn = a.flash_attn == FlashAttn::on    ? plan::FlashAttn::on
                   : a.flash_attn == FlashAttn::off ? plan::FlashAttn::off
                                                    : plan::FlashAttn::automatic;
    if (auto t = cache_type(a.cache_type_k)) s.type_k = *t;
    if (auto t = cache_type(a.cache_type_v)) s.type_v = *t;
    if (a.ubatch) s.n_ubatch = *a.ubatch;
    if (a.batch) s.n_batch = *a.batch;
    s.n_ubatch = std::min(s.n_ubatch, s.n_batch);
    // args.extra's memory flags (checked at config time: anything unmodelled was refused there).
    ExtraPlanFlags x;
    if (!read_extra_plan_flags(a.extra, x)) {
        s.kv_unified = x.kv_unified;
        s.swa_full = x.swa_full;
        if (x.no_repack) s.cpu_repack = false;
        s.n_cpu_moe = x.cpu_moe ? 1u << 20 : x.n_cpu_moe;
        s.cpu_tensor_patterns = std::move(x.cpu_tensor_patterns);
        s.embeddings = x.embedding;
        s.pooling = x.pooling;
    }
    s.lora = lora_pairs(model);
    s.draft = draft_model(model);
    return s;
}

std::vector<std::string> LlamaServerKind::limits_that_never_fit(const config::Config&,
                                                                const config::ModelConfig& model,
                                                                const Placement& where,
                                                                std::uint64_t capacity) const {
    std::shared_ptr<const gguf::Model> m;
    try {
        m = planned_file(model);
    } catch (const std::exception&) {
        return {};  // an unreadable file is said where it is read
    }
    std::string why;
    const auto pl = planned_for(*m, model, where, &why);
    if (!pl || pl->total.bytes <= capacity) return {};
    const auto& a = llama_args(model);
    const plan::Settings st = llama_plan_settings(model, where);
    const std::string device = where.backend == "cpu" || st.gpus.empty() ? "cpu" : st.gpus.front();
    std::optional<std::uint32_t> best;
    try {
        best = plan::max_context(*m, st, device, capacity, /*allow_beyond_train=*/true);
    } catch (const std::exception&) {
    }
    return {fmt::format(
        "args.ctx {} with {} slot(s) needs {} on {} ({}), more than the {} it can ever give: {}", a.ctx,
        a.parallel, human_bytes(pl->total.bytes), where.device, pl->total.detail, human_bytes(capacity),
        best ? fmt::format("the largest context that fits with {} slot(s) is {} (args.ctx: {})", a.parallel,
                           *best, *best)
             : std::string("not even 256 tokens fit: a smaller quantization, or fewer layers on it "
                           "(args.n_gpu_layers)"))};
}

Footprint LlamaServerKind::formula(const config::Config& cfg, const config::ModelConfig& model,
                                   const std::vector<Placement>& devices) const {
    Footprint fp;
    fp.source = Source::formula;
    const auto size = file_size_or_zero(model.path);
    std::shared_ptr<const gguf::Model> m;
    std::string why;
    if (!model.path.empty()) {
        try {
            m = planned_file(model);
        } catch (const std::exception& e) {
            why = e.what();
        }
    }
    fp.detail =
        m ? "loch plan"
          : "model file size " + human_bytes(size) + " (no plan" + (why.empty() ? "" : ": " + why) + ")";
    const auto projector = projector_plan(model);
    for (const auto& d : devices) {
        Need n;
        n.device = d.device;
        n.ctx = llama_args(model).ctx;
        n.slots = llama_args(model).parallel;
        std::optional<Planned> pl;
        if (m) pl = planned_for(*m, model, d, &why);
        if (pl) {
            n.weights_bytes = pl->weights;
            n.kv_bytes = pl->kv;
            n.layers = pl->layers;
            n.bytes = pl->total.bytes;
            n.why = pl->total.detail;
            // Partial offload: the host's part is booked on `cpu` (Need::host_bytes); on an APU it is the
            // same pool as the device's.
            if (pl->host > 0 && d.unified) {
                n.bytes += pl->host;
                n.why += " + " + pl->host_detail;
            } else if (pl->host > 0) {
                n.host_bytes = pl->host;
                n.host_why = pl->host_detail;
            }
        } else {
            n.weights_bytes = size;
            n.bytes = size;
            n.why = "model file size";
        }
        if (projector) {
            const auto bytes = projector_bytes(*projector, model, d);
            n.bytes += bytes;
            n.weights_bytes += projector->weights;
            n.why += projector_why(*projector, bytes);
        }
        if (const auto cache = prompt_cache_bytes(model, d)) {
            n.bytes += cache;
            n.why += fmt::format(" + prompt cache {} (args.cache_ram)", human_bytes(cache));
        }
        // A configured `memory:` is the user's word for what it needs: never reserve less.
        if (auto conf = model.memory_on(d.device); conf && *conf > n.bytes) {
            n.why = "configured memory " + human_bytes(*conf) + " (over " + n.why + ")";
            n.bytes = *conf;
            n.source = Source::configured;
        }
        n.bytes += cfg.device(d.device).margin;
        fp.needs.push_back(n);
    }
    return fp;
}

std::vector<Need> LlamaServerKind::split_formula(const config::Config& cfg, const config::ModelConfig& model,
                                                 const Placement& where) const {
    if (!where.split() || where.backend == "cpu") return {};
    std::optional<plan::Plan> p;
    try {
        p = plan::make_plan(*planned_file(model), llama_plan_settings(model, where));
    } catch (const std::exception&) {
        return {};  // no plan of the file: no split (one device's formula says why)
    }
    std::vector<Need> out;
    const auto all = where.all();
    for (std::size_t i = 0; i < all.size(); ++i) {
        const plan::DevicePlan* dp = p->find(p->settings.gpus.at(i));
        if (!dp) return {};
        Need n;
        n.device = all[i].device;
        n.ctx = llama_args(model).ctx;
        n.slots = llama_args(model).parallel;
        n.layers = p->shape.n_layer;
        n.weights_bytes = dp->weights.bytes + dp->repack.bytes;
        n.kv_bytes = dp->kv.bytes;
        n.bytes = dp->total() + cfg.device(all[i].device).margin;
        n.source = Source::formula;
        n.why = fmt::format(
            "loch plan, split {} of {}: weights {} + KV {} + compute {} + output {} + overhead {}", i + 1,
            all.size(), human_bytes(dp->weights.bytes + dp->repack.bytes), human_bytes(dp->kv.bytes),
            human_bytes(dp->compute.bytes), human_bytes(dp->output.bytes), human_bytes(dp->overhead.bytes));
        out.push_back(std::move(n));
    }
    // The projector on the main device (the split's first).
    if (const auto projector = projector_plan(model); projector && !out.empty()) {
        const auto bytes = projector_bytes(*projector, model, where);
        out.front().bytes += bytes;
        out.front().weights_bytes += projector->weights;
        out.front().why += projector_why(*projector, bytes);
    }
    return out;
}

asio::awaitable<Footprint> LlamaServerKind::estimate(const EstimateContext& ctx, const config::Config& cfg,
                                                     const config::ModelConfig& model,
                                                     const std::vector<Placement>& devices) const {
    Footprint formula = this->formula(cfg, model, devices);
    // The dry-run tool of the same build sits next to the server binary: the build of the devices' backend
    // (a CPU build cannot open a CUDA0 to size it).
    const auto server = devices.empty() ? cfg.program(name()) : cfg.program(name(), devices.front().backend);
    const auto fit_params =
        server.empty() ? std::filesystem::path() : server.parent_path() / plan::kFitParamsProgram;
    if (fit_params.empty() || !std::filesystem::exists(fit_params)) {
        formula.detail += "; dry run unavailable (llama-fit-params not found)";
        co_return formula;
    }
    std::shared_ptr<const gguf::Model> m;
    try {
        m = planned_file(model);
    } catch (const std::exception&) {
    }
    const auto projector = projector_plan(model);  // read once, for every device below
    Footprint fp;
    fp.source = Source::engine_dry_run;
    fp.detail = "largest of loch's plan and llama-fit-params (engine flags) + what a dry run leaves out";
    for (std::size_t di = 0; di < devices.size(); ++di) {
        const Placement& d = devices[di];
        auto argv = llama_server_argv(fit_params, model, d, 1);  // the port is not used by a dry run
        // The engine's argv minus server-only flags llama-fit-params does not know.
        std::vector<std::string> args;
        for (std::size_t i = 1; i < argv.size(); ++i) {
            const auto& a = argv[i];
            // (-np stays: the pinned llama-fit-params takes it, and the slots' streams change the KV cache.)
            // (--mmproj: llama-fit-params does not take it; the projector is added below, planned. --lora:
            // its fit-print never loads adapters; they are added below, planned. The draft model's flags
            // are the server's: the draft is planned and added below.)
            if (a == "--host" || a == "--port" || a == "-lv" || a == "--fit" || a == "--alias" ||
                a == "--mmproj" || a == "--cache-ram" || a == "--lora" || a == "--lora-scaled" ||
                a.starts_with("--spec-")) {
                ++i;
                continue;
            }
            if (a == "--no-webui" || a == "--no-warmup") continue;  // server-only; no decode in a dry run
            args.push_back(a);
        }
        std::vector<std::string> full{fit_params.string()};
        full.insert(full.end(), args.begin(), args.end());
        full.insert(full.end(), {"--fit", "off", "--fit-print", "on"});
        std::string why;
        // The engine's view of the devices: only its own are visible, named as inside the engine.
        auto out = co_await cached_dry_run(ctx, fit_params, full, device_environment(d, true), &why);
        std::optional<plan::DryRunResult> parsed;
        if (out) {
            try {
                parsed = plan::parse_fit_print(*out);
            } catch (const std::exception& e) {
                why = e.what();
            }
        }
        Need n = formula.needs[di];
        if (!parsed) {
            formula.detail += "; dry run failed on " + d.device + ": " + why;
            fp.needs.push_back(n);
            continue;
        }
        // What the dry run counts plus what it leaves out (plan/reservation.hpp); without a plan of the
        // file, only what it counts.
        std::optional<plan::Plan> p;
        if (m) {
            try {
                p = plan::make_plan(*m, llama_plan_settings(model, d));
            } catch (const std::exception&) {
                // the formula candidate already says why the file cannot be planned
            }
        }
        const plan::DevicePlan* dp = p ? device_plan(*p, d) : nullptr;
        // Less what the dry run counts beyond the server (its n_batch rows of logits; plan/reservation.hpp).
        const std::uint64_t excess =
            m && dp ? plan::dry_run_excess(*m, llama_plan_settings(model, d), dp->device) : 0;
        const plan::DryRunCandidate c = plan::dry_run_candidate(*parsed, d.backend == "cpu", dp, excess);
        const std::uint64_t margin = cfg.device(d.device).margin;
        const std::uint64_t projector_b = projector ? projector_bytes(*projector, model, d) : 0;
        const std::uint64_t cache_b = prompt_cache_bytes(model, d);  // the server's, not the dry run's
        const auto best = largest_of(
            {{"loch plan", {n.bytes, n.source, n.why}},
             {"dry run + what it leaves out",
              {c.bytes() + projector_b + cache_b + margin, Source::engine_dry_run,
               fmt::format("llama-fit-params {} + {}{}{}", human_bytes(c.counted), human_bytes(c.leaves_out),
                           projector ? projector_why(*projector, projector_b) : "",
                           cache_b ? fmt::format(" + prompt cache {} (args.cache_ram)", human_bytes(cache_b))
                                   : std::string())}}});
        n.bytes = best.bytes;
        n.why = best.detail;
        n.source = best.source;
        n.weights_bytes = std::max(n.weights_bytes, c.weights);
        n.kv_bytes = std::max(n.kv_bytes, c.kv);
        fp.needs.push_back(n);
    }
    co_return fp;
}

}  // namespace loch::engines
