#include "broker/footprint.hpp"

#include <algorithm>
#include <cctype>

#include <boost/asio/use_awaitable.hpp>

#include "engines/engine.hpp"
#include "engines/process.hpp"
#include "plan/dry_run.hpp"

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

Footprint formula_footprint(const config::Config& cfg, const config::ModelConfig& model,
                            const std::vector<std::string>& devices) {
    Footprint fp;
    fp.source = Source::formula;
    std::error_code ec;
    const auto size = model.path.empty() ? 0 : std::filesystem::file_size(model.path, ec);
    fp.detail = "model file size " + human_bytes(ec ? 0 : size) + " + configured margin (no dry run)";
    for (const auto& d : devices) {
        Need n;
        n.device = d;
        n.weights_bytes = ec ? 0 : size;
        n.ctx = model.args.ctx;
        n.slots = model.args.parallel;
        n.bytes = n.weights_bytes + cfg.device(d).margin;
        fp.needs.push_back(n);
    }
    return fp;
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
    for (const auto& l : proc->log().lines()) out += l + "\n";
    const int st = proc->wait_status().value_or(-1);
    if (st != 0) {
        *why = "exit status " + std::to_string(st) + ": " +
               (out.size() > 400 ? out.substr(out.size() - 400) : out);
        co_return std::nullopt;
    }
    co_return out;
}

}  // namespace

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
    Footprint fp;
    fp.source = Source::engine_dry_run;
    fp.detail = "llama-fit-params with the engine's flags";
    for (const auto& d : devices) {
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
        auto out = co_await run_async(ex_, full, std::chrono::seconds(120), &why);
        std::optional<plan::DryRunResult> parsed;
        if (out) {
            try {
                parsed = plan::parse_fit_print(*out);
            } catch (const std::exception& e) {
                why = e.what();
            }
        }
        if (!parsed) {
            formula.detail += "; dry run failed on " + d + ": " + why;
            co_return formula;
        }
        Need n;
        n.device = d;
        n.ctx = model.args.ctx;
        n.slots = model.args.parallel;
        for (const auto& dev : parsed->devices) {
            // The CPU placement counts host buffers; a GPU placement counts the GPU's (host ones are RAM).
            if ((d == "cpu") != (dev.device == "cpu")) continue;
            n.weights_bytes += dev.model.bytes;
            n.kv_bytes += dev.context.bytes;
            n.bytes += dev.total();
        }
        n.bytes += cfg.device(d).margin;
        fp.needs.push_back(n);
    }
    co_return fp;
}

}  // namespace loch::broker
