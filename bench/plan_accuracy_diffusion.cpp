// bench/plan-accuracy-diffusion — loch's image plan against what the real sd-server uses, per case and size.
//
// Each (models, options) case × size starts sd-server afresh (so the process's peak is this generation's),
// draws one image with one step, and records side by side:
//   planned   loch::plan::plan_diffusion: weights on the device + process + the largest phase (what loch
//             reserves for the engine and the request together)
//   measured  on the CPU the process's peak RSS (VmHWM); on a GPU the peak of nvidia-smi's per-process
//             memory, sampled every 50 ms during the request
//   engine    sd.cpp's own "compute buffer size" lines (the largest per phase) against the planned phase
//   idle      on a GPU, the process's memory for a few seconds after the answer (what sd-server keeps)
//             against what loch books for the loaded engine (weights + process + the retained pool)
// and prints a markdown table with the signed error (negative = plan too low: a failure).
//
//   plan-accuracy-diffusion --sd-server PATH --synth PATH [--gpu] [--cases a,b] [--sizes 256,1536x1024]
//                           [--work DIR] [--markdown F] [--jsonl F]
#include <sys/types.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <map>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include <fmt/format.h>
#include <CLI/CLI.hpp>
#include <nlohmann/json.hpp>

#include "core/memory.hpp"
#include "plan/diffusion.hpp"
#include "support/engine_process.hpp"

namespace fs = std::filesystem;
using namespace loch;
using namespace std::chrono_literals;

namespace {

struct Component {
    std::string flag;  // sd-server's flag: "-m", "--diffusion-model", "--clip_l", "--taesd", "--vae", "--llm"
    std::string preset;  // loch-synth --diffusion preset (--llm: an LLM --preset)
    std::string type = "f16";
    bool llm() const { return flag == "--llm"; }
};
struct Case {
    std::string id;
    std::vector<Component> files;
    plan::DiffusionOptions opts;
    bool gpu_only = false;  // too large for a CPU run
    std::string prompt = "x";
    int steps = 1;
};

// "lighthouse" x words: the prompt bench/sd-text-encoder.sh measured the text encoder with.
std::string words(int n) {
    std::string out;
    for (int i = 0; i < n; ++i) out += i ? " lighthouse" : "lighthouse";
    return out;
}

plan::DiffusionOptions with(plan::DiffusionOptions o, bool plan::DiffusionOptions::*flag) {
    o.*flag = true;
    return o;
}

std::vector<Case> cases() {
    plan::DiffusionOptions fa, tiling, both;
    fa.flash_attention = true;
    tiling.vae_tiling = true;
    both.flash_attention = both.vae_tiling = true;
    const std::vector<Component> flux_dev = {
        {"--diffusion-model", "flux1-dev", "q8_0"}, {"--clip_l", "clip-l", "q8_0"}, {"--vae", "flux-vae"}};
    const std::vector<Component> flux2_dev = {{"--diffusion-model", "flux2-dev", "q8_0"},
                                              {"--llm", "mistral-small-3.2-24b", "q8_0"},
                                              {"--vae", "flux2-vae"}};
    return {
        {"flux-tiny+taef1",
         {{"--diffusion-model", "flux-tiny"}, {"--clip_l", "clip-l", "q8_0"}, {"--taesd", "taef1"}},
         {}},
        {"flux-tiny+vae",
         {{"--diffusion-model", "flux-tiny"}, {"--clip_l", "clip-l", "q8_0"}, {"--vae", "flux-vae"}},
         {}},
        {"sd1.5+taesd", {{"-m", "sd1.5"}, {"--taesd", "taesd"}}, {}},
        {"sd1.5", {{"-m", "sd1.5"}}, {}},
        {"sd1.5-fa", {{"-m", "sd1.5"}}, fa},
        {"flux1-dev+taef1",
         {{"--diffusion-model", "flux1-dev", "q8_0"}, {"--clip_l", "clip-l", "q8_0"}, {"--taesd", "taef1"}},
         {},
         true},
        {"flux1-dev+vae",
         {{"--diffusion-model", "flux1-dev", "q8_0"}, {"--clip_l", "clip-l", "q8_0"}, {"--vae", "flux-vae"}},
         {},
         true},
        {"flux1-dev-fa+vae",
         {{"--diffusion-model", "flux1-dev", "q8_0"}, {"--clip_l", "clip-l", "q8_0"}, {"--vae", "flux-vae"}},
         fa,
         true},
        // Issue 26's option product: each option alone and combined, for Flux and SD1.
        {"flux1-dev-tiling+vae", flux_dev, tiling, true},
        {"flux1-dev-fa-tiling+vae", flux_dev, both, true},
        {"sd1.5-tiling", {{"-m", "sd1.5"}}, tiling},
        {"sd1.5-fa-tiling", {{"-m", "sd1.5"}}, both},
        // Issue 32: Flux.2-dev with Mistral Small 3.2 as its text encoder and the 32-channel VAE, at Q8_0 as
        // in the Strix Halo story (56.7 GB of weights). The planner does not model Flux.2 yet: these record
        // the truth it will be fitted to.
        {"flux2-tiny+vae",
         {{"--diffusion-model", "flux2-tiny"}, {"--llm", "tiny-mistral-te"}, {"--vae", "flux2-vae"}},
         {}},
        {"flux2-dev+vae", flux2_dev, {}, true},
        {"flux2-dev-fa+vae", flux2_dev, fa, true},
        // Flux.2's settings product (issue 32): tiling, direct convolutions, each placement flag, a long
        // prompt (the text encoder is quadratic in it) and several steps, with and without flash attention.
        {"flux2-dev-tiling+vae", flux2_dev, with(tiling, &plan::DiffusionOptions::vae_tiling), true},
        {"flux2-dev-fa-tiling+vae", flux2_dev, both, true},
        {"flux2-dev-fa-convdirect+vae", flux2_dev, with(fa, &plan::DiffusionOptions::vae_conv_direct), true},
        {"flux2-dev-fa-cliponcpu+vae", flux2_dev, with(fa, &plan::DiffusionOptions::clip_on_cpu), true},
        {"flux2-dev-fa-vaeoncpu+vae", flux2_dev, with(fa, &plan::DiffusionOptions::vae_on_cpu), true},
        {"flux2-dev-fa-offload+vae", flux2_dev, with(fa, &plan::DiffusionOptions::offload_to_cpu), true},
        {"flux2-dev-fa-prompt1200+vae", flux2_dev, fa, true, words(1200)},
        {"flux2-dev-prompt300+vae", flux2_dev, {}, true, words(300)},
        {"flux2-dev-fa-steps4+vae", flux2_dev, fa, true, "x", 4},
    };
}

std::string read_file(const fs::path& p) {
    std::ifstream in(p, std::ios::binary);
    return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}

std::uint64_t vm_hwm(pid_t pid) {
    std::ifstream in(fmt::format("/proc/{}/status", pid));
    std::string line;
    while (std::getline(in, line))
        if (line.rfind("VmHWM:", 0) == 0) return std::stoull(line.substr(6)) * 1024;
    return 0;
}

// nvidia-smi's used memory of `pid` in bytes (0 when not listed).
std::uint64_t gpu_used(pid_t pid, const fs::path& scratch) {
    const auto out = scratch / "smi.txt";
    test::Process smi("/usr/bin/env",
                      {"nvidia-smi", "--query-compute-apps=pid,used_memory", "--format=csv,noheader,nounits"},
                      out);
    smi.wait_for(5s);
    std::istringstream in(read_file(out));
    std::string line;
    while (std::getline(in, line)) {
        const auto comma = line.find(',');
        if (comma == std::string::npos) continue;
        if (std::stol(line.substr(0, comma)) == pid) return std::stoull(line.substr(comma + 1)) * kMiB;
    }
    return 0;
}

// sd.cpp's "<name> compute buffer size: X MB(…)" lines: the largest per planner phase, MiB.
std::map<std::string, double> engine_phases(const std::string& log) {
    std::map<std::string, double> out;
    std::istringstream in(log);
    std::string line;
    while (std::getline(in, line)) {
        const auto at = line.find(" compute buffer size: ");
        if (at == std::string::npos || at == 0) continue;
        const auto b = line.rfind(' ', at - 1) + 1;
        const std::string name = line.substr(b, at - b);
        const bool llm =
            name == "mistral_small3.2" || name == "ministral3.3b" || name == "qwen3" || name == "qwen2.5vl";
        const std::string phase = name == "clip" || name == "t5" || llm ? "text encoder"
                                  : name == "taesd" || name == "vae"    ? "decoder"
                                                                        : "diffusion step";
        out[phase] = std::max(out[phase], std::stod(line.substr(at + 22)));
    }
    return out;
}

}  // namespace

int main(int argc, char** argv) {
    CLI::App app{"loch's image plan against sd-server's real peak memory"};
    std::string server, synth, work = "/tmp/loch-plan-accuracy-diffusion", markdown, jsonl, only;
    std::vector<std::string> sizes = {"256", "512", "768", "1024"};
    bool gpu = false;
    double gpu_overhead_mib = double(plan::kDiffusionGpuContextBytes) / double(kMiB);
    app.add_option("--sd-server", server, "sd-server binary")->required();
    app.add_option("--synth", synth, "loch-synth binary")->required();
    app.add_flag("--gpu", gpu, "measure GPU memory (nvidia-smi per process) instead of RSS");
    app.add_option("--gpu-overhead-mib", gpu_overhead_mib, "the CUDA context in the plan, MiB");
    app.add_option("--cases", only, "comma-separated case ids (default: all that fit the mode)");
    app.add_option("--sizes", sizes, "sizes: a side (square) or WxH, e.g. 1024,3000x2000")->delimiter(',');
    double idle_s = 3;
    app.add_option("--idle-s", idle_s,
                   "on a GPU: how long after the answer the idle engine is sampled (what sd-server keeps)");
    app.add_option("--work", work, "scratch folder (models are generated once)");
    app.add_option("--markdown", markdown, "write the table here too");
    app.add_option("--jsonl", jsonl, "one JSON line per measurement");
    CLI11_PARSE(app, argc, argv);
    fs::create_directories(work);
    std::string table = fmt::format(
        "| case | size | planned MiB | measured MiB ({}) | error | largest phase planned / sd.cpp's line MiB "
        "| idle after: booked / measured MiB |\n"
        "|---|---|---|---|---|---|---|\n",
        gpu ? "nvidia-smi peak" : "VmHWM");
    std::ofstream jl;
    if (!jsonl.empty()) jl.open(jsonl, std::ios::app);
    int under = 0;
    for (const auto& c : cases()) {
        if (!only.empty() && ("," + only + ",").find("," + c.id + ",") == std::string::npos) continue;
        if (only.empty() && c.gpu_only && !gpu) continue;
        std::vector<std::pair<std::string, fs::path>> parts;
        std::vector<std::string> args;
        fs::path main_file;
        for (const auto& f : c.files) {
            const fs::path p = fs::path(work) / (f.preset + "-" + f.type + ".gguf");
            if (!fs::exists(p)) {
                test::Process gen(synth,
                                  {f.llm() ? "--preset" : "--diffusion", f.preset,
                                   f.llm() ? "--quant" : "--type", f.type, "--out", p.string()},
                                  fs::path(work) / "synth.log");
                if (gen.wait_for(600s) != 0) {
                    std::fprintf(stderr, "loch-synth %s failed\n", f.preset.c_str());
                    return 2;
                }
            }
            args.insert(args.end(), {f.flag, p.string()});
            if (f.flag == "-m" || f.flag == "--diffusion-model")
                main_file = p;
            else
                parts.emplace_back(f.flag.substr(2), p);
        }
        const auto files = plan::read_diffusion_files(main_file, parts);
        auto opts = c.opts;
        opts.gpu = gpu;
        opts.prompt_bytes = c.prompt.size();
        if (opts.flash_attention) args.push_back("--diffusion-fa");
        if (opts.vae_tiling) args.push_back("--vae-tiling");
        if (opts.vae_conv_direct) args.push_back("--vae-conv-direct");
        if (opts.clip_on_cpu) args.push_back("--clip-on-cpu");
        if (opts.vae_on_cpu) args.push_back("--vae-on-cpu");
        if (opts.offload_to_cpu) args.push_back("--offload-to-cpu");
        for (const auto& size : sizes) {
            const auto x = size.find('x');
            const std::uint32_t w = std::stoul(size.substr(0, x)),
                                h = x == std::string::npos ? w : std::stoul(size.substr(x + 1));
            const auto p = plan::plan_diffusion(files, opts, w, h);
            const std::uint64_t process = gpu ? std::uint64_t(gpu_overhead_mib * double(kMiB))
                                              : plan::diffusion_process_bytes(files, false);
            const std::uint64_t planned = p.device_weights + process + p.device_compute;
            const auto port = test::free_port();
            const fs::path log = fs::path(work) / fmt::format("{}-{}x{}.log", c.id, w, h);
            std::vector<std::string> a = args;
            a.insert(a.end(), {"--listen-ip", "127.0.0.1", "--listen-port", std::to_string(port), "-v",
                               "--steps", std::to_string(c.steps)});
            test::Process sd(server, a, log);
            bool up = false;
            for (int i = 0; i < 1200 && sd.running() && !up; ++i) {
                try {
                    up = test::http_get(port, "/", 1s).status > 0;
                } catch (const std::exception&) {
                    std::this_thread::sleep_for(250ms);
                }
            }
            std::atomic<bool> done{false};
            std::uint64_t gpu_peak = 0;
            std::thread sampler;
            if (gpu && up)
                sampler = std::thread([&] {
                    while (!done) {
                        gpu_peak = std::max(gpu_peak, gpu_used(sd.pid(), work));
                        std::this_thread::sleep_for(50ms);
                    }
                });
            int status = 0;
            if (up) {
                try {
                    status =
                        test::http_post_json(
                            port, "/v1/images/generations",
                            nlohmann::json{{"prompt", c.prompt}, {"size", fmt::format("{}x{}", w, h)}}.dump(),
                            std::chrono::minutes(30))
                            .status;
                } catch (const std::exception& e) {
                    std::fprintf(stderr, "%s %ux%u: %s\n", c.id.c_str(), w, h, e.what());
                }
            }
            done = true;
            if (sampler.joinable()) sampler.join();
            // What the idle engine keeps after the answer (ggml-cuda's pool, buffers sd.cpp does not free),
            // against what loch books for the loaded engine: weights + process + the request's retained part.
            std::uint64_t idle = 0;
            if (gpu && status == 200) {
                const auto until = std::chrono::steady_clock::now() + std::chrono::duration<double>(idle_s);
                while (std::chrono::steady_clock::now() < until) {
                    idle = std::max(idle, gpu_used(sd.pid(), work));
                    std::this_thread::sleep_for(100ms);
                }
            }
            const std::uint64_t retained = p.device_pool;
            const std::uint64_t planned_idle = p.device_weights + process + retained;
            if (idle > planned_idle) ++under;
            const std::uint64_t measured = gpu ? gpu_peak : vm_hwm(sd.pid());
            sd.stop(10s);
            const auto engine = engine_phases(read_file(log));
            double planned_phase = 0;
            for (const auto& ph : p.phases)
                if (ph.name == p.largest_phase) planned_phase = double(ph.bytes) / double(kMiB);
            const double err = measured ? (double(planned) - double(measured)) / double(measured) * 100 : 0;
            if (measured && planned < measured) ++under;
            const double engine_phase = engine.contains(p.largest_phase) ? engine.at(p.largest_phase) : 0;
            const std::string row =
                fmt::format("| {} | {}x{} | {:.0f} | {} | {} | {} {:.1f} / {:.1f} | {} |\n", c.id, p.width,
                            p.height, double(planned) / double(kMiB),
                            status == 200 && measured ? fmt::format("{:.0f}", double(measured) / double(kMiB))
                                                      : fmt::format("failed (HTTP {})", status),
                            status == 200 && measured ? fmt::format("{:+.1f} %", err) : "–", p.largest_phase,
                            planned_phase, engine_phase,
                            idle ? fmt::format("{:.0f} / {:.0f}", double(planned_idle) / double(kMiB),
                                               double(idle) / double(kMiB))
                                 : "–");
            std::fputs(row.c_str(), stdout);
            std::fflush(stdout);
            table += row;
            if (jl)
                jl << nlohmann::json{{"case", c.id},
                                     {"size", size},
                                     {"width", p.width},
                                     {"height", p.height},
                                     {"idle_after_bytes", idle},
                                     {"planned_idle_bytes", planned_idle},
                                     {"gpu", gpu},
                                     {"planned_bytes", planned},
                                     {"measured_bytes", measured},
                                     {"status", status},
                                     {"engine_phases_mib", engine},
                                     {"largest_phase", p.largest_phase},
                                     {"planned_phase_mib", planned_phase},
                                     {"planned_phases_mib",
                                      [&] {
                                          nlohmann::json j;
                                          for (const auto& ph : p.phases)
                                              j[ph.name] = double(ph.bytes) / double(kMiB);
                                          return j;
                                      }()}}
                          .dump()
                   << std::endl;  // flushed: a run cut short by its time limit keeps what it measured
        }
    }
    std::printf("\n%s\nplanned below measured: %d\n", table.c_str(), under);
    if (!markdown.empty()) std::ofstream(markdown) << table << "\nplanned below measured: " << under << "\n";
    return under == 0 ? 0 : 1;
}
