#include "broker/footprint.hpp"

#include <algorithm>
#include <cctype>
#include <fstream>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include <boost/asio/use_awaitable.hpp>

#include "engines/engine.hpp"
#include "engines/process.hpp"
#include "gguf/reader.hpp"
#include "plan/dry_run.hpp"
#include "plan/plan.hpp"
#include "plan/reservation.hpp"

namespace loch::broker {

namespace asio = boost::asio;

Placement placement_for(const std::string& device) {
    if (device == "cpu") return {{"none"}, 0};
    // "cuda0" / "nvidia:0" → CUDA0; "rocm1" / "amd:…" → ROCm index when numeric; vulkanN → VulkanN.
    auto digits = [&](std::string_view s) {
        std::string d;
        for (char c : s)
            if (std::isdigit(static_cast<unsigned char>(c))) d += c;
        return d.empty() ? std::string("0") : d;
    };
    if (device.starts_with("cuda") || device.starts_with("nvidia"))
        return {{"CUDA" + digits(device)}, engines::kAllLayers};
    if (device.starts_with("rocm") || device.starts_with("amd"))
        return {{"ROCm" + digits(device)}, engines::kAllLayers};
    if (device.starts_with("vulkan")) return {{"Vulkan" + digits(device)}, engines::kAllLayers};
    return {{}, engines::kAllLayers};
}

namespace {

// Runs llama-fit-params as a supervised child process and returns its output once it exits.
asio::awaitable<std::optional<std::string>> run_async(asio::any_io_executor ex, std::vector<std::string> argv,
                                                      std::chrono::milliseconds timeout, std::string* why) {
    engines::SpawnSpec spec;
    spec.argv = std::move(argv);
    spec.ring_lines = 5000;
    std::unique_ptr<engines::Process> proc;
    try {
        proc = engines::Process::spawn(ex, spec);
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

// llama-server's settings for `model` on `device`, as the planner takes them.
plan::Settings plan_settings(const config::ModelConfig& model, const std::string& device) {
    const auto& a = model.args;
    plan::Settings s;
    s.n_ctx = a.ctx;
    s.n_parallel = std::max<std::uint32_t>(1, a.parallel);
    const Placement pl = placement_for(device);
    if (device != "cpu") {
        for (const auto& d : pl.llama_devices) {
            std::string low;
            for (char c : d) low += static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
            s.gpus.push_back(low);
        }
        s.n_gpu_layers = a.n_gpu_layers.value_or(pl.n_gpu_layers);
    } else {
        s.n_gpu_layers = 0;
    }
    s.flash_attn = a.flash_attn == config::FlashAttn::on    ? plan::FlashAttn::on
                   : a.flash_attn == config::FlashAttn::off ? plan::FlashAttn::off
                                                            : plan::FlashAttn::automatic;
    if (auto t = cache_type(a.cache_type_k)) s.type_k = *t;
    if (auto t = cache_type(a.cache_type_v)) s.type_v = *t;
    if (a.ubatch) s.n_ubatch = *a.ubatch;
    if (a.batch) s.n_batch = *a.batch;
    s.n_ubatch = std::min(s.n_ubatch, s.n_batch);
    return s;
}

// The planner's figures for `device`: the device's total, and (CPU) what a dry run does not count.
struct Planned {
    MemoryFigure total;
    std::uint64_t weights = 0, kv = 0;
    std::uint32_t layers = 0;
};

// The plan's figures for the loch device the plan was made for (plan_settings(model, device)).
const plan::DevicePlan* device_plan(const plan::Plan& p, const std::string& device) {
    if (device == "cpu") return p.find("cpu");
    return p.settings.gpus.empty() ? nullptr : p.find(p.settings.gpus.front());
}

std::optional<Planned> planned_for(const gguf::Model& m, const config::ModelConfig& model,
                                   const std::string& device, std::string* why) {
    try {
        const plan::Plan p = plan::make_plan(m, plan_settings(model, device));
        const plan::DevicePlan* dp = device_plan(p, device);
        if (!dp) return std::nullopt;
        Planned out;
        out.total = {dp->total(), Source::formula,
                     fmt::format("loch plan: weights {} + repack {} + KV {} + compute {} + output {} + "
                                 "overhead {}",
                                 human_bytes(dp->weights.bytes), human_bytes(dp->repack.bytes),
                                 human_bytes(dp->kv.bytes), human_bytes(dp->compute.bytes),
                                 human_bytes(dp->output.bytes), human_bytes(dp->overhead.bytes))};
        out.weights = dp->weights.bytes + dp->repack.bytes;
        out.kv = dp->kv.bytes;
        out.layers = p.shape.n_layer;
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

// What identifies a file for the cache: path, size and modification time.
std::string file_identity(const std::filesystem::path& p) {
    std::error_code ec;
    const auto size = std::filesystem::file_size(p, ec);
    const auto mtime = std::filesystem::last_write_time(p, ec);
    return fmt::format("{}|{}|{}", p.string(), ec ? 0 : size, ec ? 0 : mtime.time_since_epoch().count());
}

}  // namespace

MemoryFigure largest_of(const std::vector<Candidate>& candidates) {
    MemoryFigure best;
    std::string all;
    const Candidate* winner = nullptr;
    for (const auto& c : candidates) {
        all += fmt::format("{}{} {} ({})", all.empty() ? "" : "; ", c.what, human_bytes(c.figure.bytes),
                           to_string(c.figure.source));
        if (!winner || c.figure.bytes > winner->figure.bytes) winner = &c;
    }
    if (!winner) return best;
    best.bytes = winner->figure.bytes;
    best.source = winner->figure.source;
    best.detail = "largest of: " + all + " → " + winner->what;
    return best;
}

Footprint formula_footprint(const config::Config& cfg, const config::ModelConfig& model,
                            const std::vector<std::string>& devices) {
    Footprint fp;
    fp.source = Source::formula;
    const auto size = file_size_or_zero(model.path);
    std::optional<gguf::Model> m;
    std::string why;
    if (model.engine == config::EngineKind::llama_server && !model.path.empty()) {
        try {
            m = gguf::read_model(model.path);
        } catch (const std::exception& e) {
            why = e.what();
        }
    }
    fp.detail =
        m ? "loch plan"
          : "model file size " + human_bytes(size) + " (no plan" + (why.empty() ? "" : ": " + why) + ")";
    for (const auto& d : devices) {
        Need n;
        n.device = d;
        n.ctx = model.args.ctx;
        n.slots = model.args.parallel;
        std::optional<Planned> pl;
        if (m) pl = planned_for(*m, model, d, &why);
        if (pl) {
            n.weights_bytes = pl->weights;
            n.kv_bytes = pl->kv;
            n.layers = pl->layers;
            n.bytes = pl->total.bytes;
            n.why = pl->total.detail;
        } else {
            n.weights_bytes = size;
            n.bytes = size;
            n.why = "model file size";
        }
        n.bytes += cfg.device(d).margin;
        fp.needs.push_back(n);
    }
    return fp;
}

asio::awaitable<std::optional<std::string>> EngineDryRunFootprint::dry_run(
    const std::vector<std::string>& argv, std::string* why) {
    // The cache: the same file, flags and engine build give the same answer.
    std::string key;
    for (const auto& a : argv) key += a + '\x1f';
    key += file_identity(fit_params_);
    for (std::size_t i = 0; i + 1 < argv.size(); ++i)
        if (argv[i] == "-m") key += "|" + file_identity(argv[i + 1]);
    nlohmann::json cache = nlohmann::json::object();
    if (!cache_file_.empty()) {
        std::ifstream in(cache_file_);
        cache = nlohmann::json::parse(in, nullptr, false);
        if (!cache.is_object()) cache = nlohmann::json::object();
        if (auto it = cache.find(key); it != cache.end() && it->is_string()) co_return it->get<std::string>();
    }
    auto out = co_await run_async(ex_, argv, std::chrono::seconds(120), why);
    if (out && !cache_file_.empty()) {
        cache[key] = *out;
        std::error_code ec;
        std::filesystem::create_directories(cache_file_.parent_path(), ec);
        const auto tmp = cache_file_.string() + ".tmp";
        std::ofstream(tmp) << cache.dump();
        std::filesystem::rename(tmp, cache_file_, ec);
    }
    co_return out;
}

asio::awaitable<Footprint> EngineDryRunFootprint::estimate(const config::Config& cfg,
                                                           const config::ModelConfig& model,
                                                           const std::vector<std::string>& devices) {
    Footprint formula = formula_footprint(cfg, model, devices);
    if (model.engine != config::EngineKind::llama_server || fit_params_.empty() ||
        !std::filesystem::exists(fit_params_)) {
        formula.detail +=
            "; dry run unavailable (" +
            (model.engine != config::EngineKind::llama_server ? std::string("not a llama-server model")
                                                              : "llama-fit-params not found") +
            ")";
        co_return formula;
    }
    std::optional<gguf::Model> m;
    try {
        m = gguf::read_model(model.path);
    } catch (const std::exception&) {
    }
    Footprint fp;
    fp.source = Source::engine_dry_run;
    fp.detail = "largest of loch's plan and llama-fit-params (engine flags) + what a dry run leaves out";
    for (std::size_t di = 0; di < devices.size(); ++di) {
        const auto& d = devices[di];
        const Placement pl = placement_for(d);
        engines::LaunchOptions launch;
        launch.n_gpu_layers = pl.n_gpu_layers;
        launch.llama_devices = pl.llama_devices;
        launch.port = 1;  // not used by the dry run; avoids picking a free port
        auto argv = engines::llama_server_argv(fit_params_, model, launch);
        // The engine's argv minus server-only flags llama-fit-params does not know.
        std::vector<std::string> args;
        for (std::size_t i = 1; i < argv.size(); ++i) {
            const auto& a = argv[i];
            if (a == "--host" || a == "--port" || a == "-lv" || a == "--fit" || a == "-np") {
                ++i;
                continue;
            }
            if (a == "--no-webui") continue;
            args.push_back(a);
        }
        std::vector<std::string> full{fit_params_.string()};
        full.insert(full.end(), args.begin(), args.end());
        full.insert(full.end(), {"--fit", "off", "--fit-print", "on"});
        std::string why;
        auto out = co_await dry_run(full, &why);
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
            formula.detail += "; dry run failed on " + d + ": " + why;
            fp.needs.push_back(n);
            continue;
        }
        // What the dry run counts plus what it leaves out (plan/reservation.hpp); without a plan of the
        // file, only what it counts.
        std::optional<plan::Plan> p;
        if (m) {
            try {
                p = plan::make_plan(*m, plan_settings(model, d));
            } catch (const std::exception&) {
                // the formula candidate already says why the file cannot be planned
            }
        }
        const plan::DevicePlan* dp = p ? device_plan(*p, d) : nullptr;
        const plan::DryRunCandidate c = plan::dry_run_candidate(*parsed, d == "cpu", dp);
        const std::uint64_t margin = cfg.device(d).margin;
        const auto best = largest_of(
            {{"loch plan", {n.bytes, Source::formula, n.why}},
             {"dry run + what it leaves out",
              {c.bytes() + margin, Source::engine_dry_run,
               fmt::format("llama-fit-params {} + {}", human_bytes(c.counted), human_bytes(c.leaves_out))}}});
        n.bytes = best.bytes;
        n.why = best.detail;
        n.source = best.source;
        n.weights_bytes = std::max(n.weights_bytes, c.weights);
        n.kv_bytes = std::max(n.kv_bytes, c.kv);
        fp.needs.push_back(n);
    }
    co_return fp;
}

}  // namespace loch::broker
