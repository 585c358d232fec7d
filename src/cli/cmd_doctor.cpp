// `loch doctor [--json] [--sysroot DIR] [--model FILE.gguf]... [--ctx N] [--engine NAME]... [-c loch.yaml]`:
// the platform traps that make jobs fail, each with evidence and a fix, and with a config the limits it sets
// that no device can keep. Exit status 2 when a finding is an error.
#include <fmt/format.h>

#include <filesystem>
#include <iostream>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "cli/commands.hpp"
#include "cli/config_limits.hpp"
#include "cli/engine_binaries.hpp"
#include "devices/probe.hpp"
#include "devices/report_json.hpp"
#include "doctor/doctor.hpp"
#include "engines/kind.hpp"
#include "gguf/reader.hpp"
#include "plan/plan.hpp"

namespace loch::cli {

namespace {

// What one model needs on a single device: loch's plan for it at --ctx on the CPU (weights, KV cache, compute
// and output buffers; every layer on one device). Unreadable files are an error that names the file.
doctor::ModelDemand size_model(const std::string& path, std::uint32_t n_ctx) {
    const auto model = gguf::read_model(path);
    plan::Settings settings;
    settings.n_ctx = n_ctx;
    const auto p = plan::make_plan(model, settings);
    std::uint64_t weights = 0, kv = 0, compute = 0, output = 0;
    for (const auto& d : p.devices) {
        weights += d.weights.bytes;
        kv += d.kv.bytes;
        compute += d.compute.bytes;
        output += d.output.bytes;
    }
    const auto total = weights + kv + compute + output;
    const auto name = std::filesystem::path(path).filename().string();
    return {name,
            {total, Source::formula,
             fmt::format("loch plan of {} at n_ctx {}: weights {} + KV {} + compute {} + output {}", path,
                         p.n_ctx, human_bytes(weights), human_bytes(kv), human_bytes(compute),
                         human_bytes(output))}};
}

void print_text(const std::vector<doctor::Finding>& findings, const std::vector<doctor::ModelDemand>& models,
                const std::string& sysroot) {
    int counts[3] = {0, 0, 0};
    for (const auto& f : findings) ++counts[static_cast<int>(f.severity)];
    fmt::print("loch doctor ({}): {} error(s), {} warning(s), {} note(s) from {} checks\n", sysroot,
               counts[2], counts[1], counts[0], doctor::all_checks().size());
    for (const auto& m : models)
        fmt::print("  model {}: {} ({})\n", m.name, human_bytes(m.bytes.bytes), m.bytes.detail);
    for (const auto& f : findings) {
        fmt::print("\n[{}] {}{}\n", doctor::to_string(f.severity), f.id,
                   f.device.empty() ? "" : "  (" + f.device + ")");
        fmt::print("  {}\n", f.explanation);
        fmt::print("  evidence:\n");
        for (const auto& e : f.evidence) fmt::print("    - {}: {}   [{}]\n", e.what, e.value, e.from);
        fmt::print("  fix: {}\n", f.fix);
    }
    if (findings.empty()) fmt::print("\nNo problems found.\n");
}

}  // namespace

void add_doctor_command(CLI::App& app) {
    struct Flags {
        bool json = false;
        std::string sysroot = "/";
        std::vector<std::string> models;
        std::vector<std::string> engines;
        std::uint32_t n_ctx = 4096;
        std::string engine_dir;
        std::string config_file;
    };
    auto flags = std::make_shared<Flags>();
    auto* cmd = app.add_subcommand("doctor",
                                   "Platform traps that make inference jobs fail (GTT ceiling, unified "
                                   "memory, firmware, mmap limits, stale processes, containers), with fixes");
    cmd->add_flag("--json", flags->json, "JSON: findings with evidence and sources, and the device report");
    cmd->add_option("--sysroot", flags->sysroot, "Read /proc and /sys under DIR (a captured tree)")
        ->check(CLI::ExistingDirectory);
    cmd->add_option("--model", flags->models,
                    "A GGUF model you plan to serve (repeatable): checked against budgets")
        ->check(CLI::ExistingFile);
    cmd->add_option("--ctx", flags->n_ctx, "Context length the models are sized for")
        ->check(CLI::Range(256u, 1u << 24));
    cmd->add_option("--engine", flags->engines,
                    "Engine backend configured (repeatable): vulkan, rocm, cuda, cpu");
    cmd->add_option("--engine-dir", flags->engine_dir,
                    "Where the engine builds are (default: loch's own folder, as `loch serve` looks)")
        ->check(CLI::ExistingDirectory);
    cmd->add_option("-c,--config", flags->config_file,
                    "A loch.yaml: also say which configured limits (max_size, ctx x slots, audio length) no "
                    "device it may use can ever keep")
        ->check(CLI::ExistingFile);
    cmd->callback([flags] {
        const auto options = devices::default_probe_options(flags->sysroot, devices::process_environment());
        const auto report = devices::probe(options);
        doctor::Input input;
        for (const auto& path : flags->models) input.models.push_back(size_model(path, flags->n_ctx));
        input.engines = flags->engines;
        input.engine_builds =
            engine_binaries(flags->engine_dir.empty() ? config::LoadContext::from_process().exe_dir
                                                      : std::filesystem::path(flags->engine_dir));
        if (!flags->config_file.empty()) {
            auto ctx = config::LoadContext::from_process();
            ctx.kinds = engines::kind_schemas();
            input.limits = config_limits(config::load_config_file(flags->config_file, ctx), flags->sysroot);
        }
        const auto findings = doctor::diagnose(report, input);
        if (flags->json) {
            nlohmann::json models = nlohmann::json::array();
            for (const auto& m : input.models) {
                nlohmann::json bytes;
                loch::to_json(bytes, m.bytes);
                models.push_back({{"name", m.name}, {"bytes", bytes}});
            }
            std::cout << nlohmann::json{{"findings", doctor::to_json(findings)},
                                        {"models", models},
                                        {"report", devices::to_json(report)}}
                             .dump(2)
                      << "\n";
        } else {
            print_text(findings, input.models, flags->sysroot);
        }
        if (doctor::has_errors(findings)) throw CLI::RuntimeError(2);
    });
}

}  // namespace loch::cli
