// admission-scenario: `loch serve` on a real device with models sized against what that device can ever
// give (issue 8, "three models that need eviction plus one just under and one just over"):
//
//   1. a, b, c: each about 42 % of the device's empty capacity, so two fit and the third evicts one;
//   2. over:    a context whose reservation is 1 GiB beyond the empty capacity: refused at once;
//   3. under:   the largest context whose reservation (plan, and dry run + what it leaves out) still fits
//               the empty device: everything idle is evicted and it serves a long prompt;
//   4. a again: evicts `under` and serves.
// After every step: loch answers /health, no engine died (of OOM or anything else), every reservation is at
// least the engine's measured use (nvidia-smi per process on a GPU, RSS on the CPU), and device use stays
// within its total. One model file (zero weights, sparse) serves all five configs; only the context differs.
//
//   admission-scenario --loch build/bin/loch --engine-dir DIR --device nvidia:0 --work /tmp/as
//                      [--preset llama-3.1-70b] [--budget BYTES] [--json OUT]
// Prints one line per step and a summary; exit status 0 only when every check held.
#include <CLI/CLI.hpp>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <string>
#include <thread>
#include <vector>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "gguf/reader.hpp"
#include "plan/dry_run.hpp"
#include "plan/plan.hpp"
#include "plan/reservation.hpp"
#include "support/engine_process.hpp"
#include "support/http_client.hpp"
#include "support/process.hpp"
#include "synth/synth.hpp"

namespace fs = std::filesystem;
using namespace std::chrono_literals;
using loch::plan::Settings;
namespace gguf = loch::gguf;

namespace {

constexpr std::uint64_t kGiB = 1ull << 30;

struct Options {
    std::string loch, engine_dir, device = "nvidia:0", work = "/tmp/loch-admission", preset = "llama-3.1-70b",
                                  json_out;
    std::uint64_t budget = 0;
    std::uint16_t port = 0;  // 0: a free port (a fixed one collided with whatever else listened there)
};

std::string gib(std::uint64_t b) {
    return fmt::format("{:.2f} GiB", static_cast<double>(b) / kGiB);
}

// The plan device of a loch device id: "nvidia:0" → "cuda0" (llama.cpp's name), "cpu" → "cpu".
std::string plan_device(const std::string& d) {
    if (d == "cpu") return d;
    return "cuda" + d.substr(d.find(':') + 1);
}

Settings settings_at(const std::string& device, std::uint32_t ctx) {
    Settings st;
    st.n_ctx = ctx;
    if (device != "cpu") {
        st.gpus = {plan_device(device)};
        st.n_gpu_layers = -1;
    }
    return st;
}

// The broker's rule (broker/footprint.hpp) at `ctx`: the larger of the plan and the dry run + what it
// leaves out.
std::uint64_t reservation_at(const gguf::Model& m, const fs::path& file, const Options& o,
                             std::uint32_t ctx) {
    const Settings st = settings_at(o.device, ctx);
    const auto p = loch::plan::make_plan(m, st);
    const auto* dp = p.find(plan_device(o.device));
    const auto dr =
        loch::plan::run_fit_params((fs::path(o.engine_dir) / "llama-fit-params").string(), file.string(),
                                   loch::plan::engine_args(st), std::chrono::seconds(300));
    const auto excess = loch::plan::dry_run_excess(m, st, plan_device(o.device));
    return std::max(dp->total(), loch::plan::dry_run_candidate(dr, o.device == "cpu", dp, excess).bytes());
}

std::string config_yaml(const Options& o, const fs::path& file,
                        const std::vector<std::pair<std::string, std::uint32_t>>& models) {
    std::string y = fmt::format("listen: 127.0.0.1\nport: {}\nengine_dir: {}\nstate_dir: {}\nlog_dir: {}\n",
                                o.port, o.engine_dir, (fs::path(o.work) / "state").string(),
                                (fs::path(o.work) / "logs").string());
    y += "max_wait: 20m\ndevices:\n  " + o.device + ":\n    reserve: 0\n    margin: 0\n";
    if (o.budget) y += fmt::format("    budget: {}\n", o.budget);
    y += "defaults:\n  keep_alive: 1h\n  startup_timeout: 15m\n  watchdog: 10m\nmodels:\n";
    // The contexts are sized to fill the budget, beyond the model's training context: stretched (YaRN), as
    // loch refuses a ctx the engine would cap.
    for (const auto& [name, ctx] : models)
        y += fmt::format(
            "  - name: {}\n    path: {}\n    devices: [{}]\n    args: {{ctx: {}, parallel: 1, ctx_extension: "
            "yarn}}\n",
            name, file.string(), o.device, ctx);
    return y;
}

struct Loch {
    Loch(const Options& o, const std::string& yaml, const std::string& tag) : port(o.port) {
        try {
            loch::test::http_get(port, "/health", 1s);
            throw std::runtime_error(fmt::format("something already answers on port {}", port));
        } catch (const boost::system::system_error&) {
            // nothing listens: good
        }
        const fs::path cfg = fs::path(o.work) / ("loch-" + tag + ".yaml");
        std::ofstream(cfg) << yaml;
        proc.emplace(o.loch, std::vector<std::string>{"serve", "--config", cfg.string()},
                     fs::path(o.work) / ("loch-" + tag + ".log"));
        for (int i = 0; i < 400 && proc->running(); ++i) {
            try {
                if (loch::test::http_get(port, "/health", 1s).status == 200) return;
            } catch (const std::exception&) {
            }
            std::this_thread::sleep_for(50ms);
        }
        throw std::runtime_error("loch serve did not come up:\n" + proc->log_tail());
    }
    nlohmann::json status() const {
        return nlohmann::json::parse(loch::test::http_get(port, "/loch/status", 10s).body);
    }
    bool alive() {
        try {
            return proc->running() && loch::test::http_get(port, "/health", 5s).status == 200;
        } catch (const std::exception&) {
            return false;
        }
    }
    std::uint16_t port;
    std::optional<loch::test::Process> proc;
};

const nlohmann::json* device_of(const nlohmann::json& status, const std::string& device) {
    for (const auto& d : status.at("devices"))
        if (d.value("device", "") == device) return &d;
    return nullptr;
}

// nvidia-smi per process (pid → bytes) and the whole GPU's used/total.
std::map<int, std::uint64_t> smi_per_process() {
    std::map<int, std::uint64_t> out;
    auto r = loch::plan::run_capture(
        {"nvidia-smi", "--query-compute-apps=pid,used_memory", "--format=csv,noheader,nounits"}, 20s);
    std::istringstream in(r.out);
    std::string line;
    while (std::getline(in, line)) {
        int pid = 0;
        unsigned long long mib = 0;
        if (std::sscanf(line.c_str(), "%d, %llu", &pid, &mib) == 2) out[pid] = mib << 20;
    }
    return out;
}

std::uint64_t rss_bytes(int pid) {
    std::ifstream in(fmt::format("/proc/{}/status", pid));
    std::string k;
    while (in >> k)
        if (k == "VmRSS:") {
            std::uint64_t kb = 0;
            in >> kb;
            return kb << 10;
        }
    return 0;
}

struct Step {
    std::string name;
    int status = 0;
    double seconds = 0;
    std::string error_type;
    std::vector<std::string> failures;
};

}  // namespace

int main(int argc, char** argv) {
    Options o;
    CLI::App app{"admission-scenario: loch serve against what a device can ever give"};
    app.add_option("--loch", o.loch, "loch binary")->required();
    app.add_option("--engine-dir", o.engine_dir, "folder with llama-server and llama-fit-params")->required();
    app.add_option("--device", o.device, "loch device id (nvidia:0, cpu)");
    app.add_option("--work", o.work, "work folder (models are sparse files)");
    app.add_option("--preset", o.preset, "loch-synth preset of the one model file");
    app.add_option("--budget", o.budget, "device budget for loch (bytes; 0 = none)");
    app.add_option("--port", o.port, "loch's port (default: a free one)");
    app.add_option("--json", o.json_out, "write the steps here");
    CLI11_PARSE(app, argc, argv);
    if (o.port == 0) o.port = loch::test::free_port();
    fs::create_directories(o.work);
    o.work = fs::absolute(o.work).string();  // the config resolves relative paths against its own folder
    o.engine_dir = fs::absolute(o.engine_dir).string();
    o.loch = fs::absolute(o.loch).string();
    const fs::path file = fs::path(o.work) / (o.preset + ".gguf");
    const auto* preset = loch::synth::find_preset(o.preset);
    if (!preset) throw std::runtime_error("unknown preset " + o.preset);
    if (!fs::exists(file))
        loch::synth::write_model(file, loch::synth::build_model(preset->shape, preset->default_quant),
                                 loch::synth::Weights::zeros);
    const gguf::Model model = gguf::read_model(file);

    // What the device can ever give loch, as loch itself says (one model at a small context, not loaded).
    std::uint64_t empty = 0;
    {
        Loch probe(o, config_yaml(o, file, {{"probe", 4096}}), "probe");
        const auto status = probe.status();
        const auto* d = device_of(status, o.device);
        if (!d) throw std::runtime_error("loch does not list device " + o.device);
        empty = d->at("empty_capacity_bytes").get<std::uint64_t>();
    }
    const std::string pd = plan_device(o.device);
    auto formula_ctx = [&](std::uint64_t budget) {
        auto c = loch::plan::max_context(model, settings_at(o.device, 4096), pd, budget, true);
        if (!c) throw std::runtime_error("not even 256 tokens fit in " + gib(budget));
        return *c;
    };
    const std::uint32_t ctx_mid = formula_ctx(empty * 42 / 100);
    // Just under: the formula's answer, stepped down until the broker's rule (with the dry run) fits.
    std::uint32_t ctx_under = formula_ctx(empty);
    std::uint64_t res_under = reservation_at(model, file, o, ctx_under);
    const std::uint64_t per_256 =
        loch::plan::make_plan(model, settings_at(o.device, ctx_under + 256)).find(pd)->total() -
        loch::plan::make_plan(model, settings_at(o.device, ctx_under)).find(pd)->total();
    while (res_under > empty && ctx_under > 256) {  // step down by what the dry run adds, in 256-token steps
        const std::uint64_t steps = std::max<std::uint64_t>(
            1, (res_under - empty + per_256 - 1) / std::max<std::uint64_t>(per_256, 1));
        ctx_under = ctx_under > steps * 256 + 256 ? static_cast<std::uint32_t>(ctx_under - steps * 256) : 256;
        res_under = reservation_at(model, file, o, ctx_under);
    }
    std::uint32_t ctx_over = ctx_under;
    std::uint64_t res_over = res_under;
    while (res_over < empty + kGiB)
        res_over = loch::plan::make_plan(model, settings_at(o.device, ctx_over += 1024)).find(pd)->total();
    const std::uint64_t res_mid = reservation_at(model, file, o, ctx_mid);
    std::printf(
        "device %s: empty capacity %s\n  a,b,c: ctx %u, reservation %s each\n  under: ctx %u, reservation %s "
        "(headroom %s)\n  over:  ctx %u, plan %s (1 GiB+ beyond)\n",
        o.device.c_str(), gib(empty).c_str(), ctx_mid, gib(res_mid).c_str(), ctx_under,
        gib(res_under).c_str(), gib(empty - res_under).c_str(), ctx_over, gib(res_over).c_str());

    Loch loch_srv(
        o,
        config_yaml(
            o, file,
            {{"a", ctx_mid}, {"b", ctx_mid}, {"c", ctx_mid}, {"under", ctx_under}, {"over", ctx_over}}),
        "scenario");
    // Real work before measuring (issue 8): a prompt of three 512-token ubatches, as token ids (no tokenizer
    // needed, and the slot context of every model here holds it).
    nlohmann::json prompt = nlohmann::json::array();
    for (int i = 0; i < 1536; ++i) prompt.push_back(100 + i % 1000);
    std::vector<Step> steps;
    auto check_after = [&](Step& s) {
        if (!loch_srv.alive()) s.failures.push_back("loch is not answering /health");
        const auto st = loch_srv.status();
        const auto smi = o.device == "cpu" ? std::map<int, std::uint64_t>{} : smi_per_process();
        for (const auto& m : st.at("engines")) {
            const std::string name = m.value("name", "");
            const auto last_exit = m.value("last_exit", nlohmann::json{});
            if (!last_exit.is_null() && last_exit.value("kind", "") != "stopped" &&
                last_exit.value("kind", "") != "")
                s.failures.push_back(fmt::format("{}: engine exit {}", name, last_exit.dump()));
            if (m.value("state", "") != "ready" || !m.contains("engine") || !m["engine"]["pid"].is_number())
                continue;
            const int pid = m["engine"]["pid"];
            std::uint64_t used = o.device == "cpu" ? rss_bytes(pid) : (smi.count(pid) ? smi.at(pid) : 0);
            if (o.device != "cpu" && !smi.count(pid) && smi.size() == 1) used = smi.begin()->second;
            const std::uint64_t reserved =
                m.contains("reservation") ? m["reservation"].value("bytes", 0ull) : 0;
            std::printf("    %s ready: reserved %s, measured %s\n", name.c_str(), gib(reserved).c_str(),
                        gib(used).c_str());
            if (used > reserved)
                s.failures.push_back(fmt::format("{}: measured {} over reserved {}", name, used, reserved));
        }
    };
    auto request = [&](const std::string& model_name, int want_status, const std::string& want_type) {
        Step s;
        s.name = model_name;
        const auto t0 = std::chrono::steady_clock::now();
        const nlohmann::json body = {{"model", model_name}, {"prompt", prompt}, {"max_tokens", 4}};
        try {
            const auto r = loch::test::http_post_json(o.port, "/v1/completions", body.dump(), 20min);
            s.status = r.status;
            if (r.status != 200) {
                const auto j = nlohmann::json::parse(r.body, nullptr, false);
                if (j.is_object() && j.contains("error")) s.error_type = j["error"].value("type", "");
                std::printf("    %s\n", r.body.substr(0, 600).c_str());
            }
        } catch (const std::exception& e) {
            s.failures.push_back(std::string("request failed: ") + e.what());
        }
        s.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
        if (s.status != want_status)
            s.failures.push_back(fmt::format("status {} (want {})", s.status, want_status));
        if (!want_type.empty() && s.error_type != want_type)
            s.failures.push_back(fmt::format("error.type '{}' (want {})", s.error_type, want_type));
        std::printf("%-6s → %d %s in %.1f s\n", model_name.c_str(), s.status, s.error_type.c_str(),
                    s.seconds);
        check_after(s);
        for (const auto& f : s.failures) std::printf("    FAIL %s\n", f.c_str());
        steps.push_back(s);
        return s;
    };
    request("a", 200, "");
    request("b", 200, "");
    request("c", 200, "");  // evicts a
    const auto over = request("over", 503, "insufficient_memory");
    if (over.seconds > 5) steps.back().failures.push_back("the refusal was not at once");
    request("under", 200, "");  // evicts b and c
    request("a", 200, "");      // evicts under

    std::size_t failed = 0;
    nlohmann::json out = {{"device", o.device},
                          {"empty_capacity_bytes", empty},
                          {"ctx_mid", ctx_mid},
                          {"ctx_under", ctx_under},
                          {"ctx_over", ctx_over},
                          {"reservation_under_bytes", res_under},
                          {"reservation_mid_bytes", res_mid},
                          {"plan_over_bytes", res_over},
                          {"steps", nlohmann::json::array()}};
    for (const auto& s : steps) {
        failed += !s.failures.empty();
        out["steps"].push_back({{"model", s.name},
                                {"status", s.status},
                                {"seconds", s.seconds},
                                {"error_type", s.error_type},
                                {"failures", s.failures}});
    }
    const std::string log = loch_srv.proc->log();
    for (const char* oom : {"out of memory", "cudaMalloc failed", "failed to allocate"})
        if (log.find(oom) != std::string::npos) {
            std::printf("FAIL loch's log mentions '%s'\n", oom);
            ++failed;
        }
    if (!o.json_out.empty()) std::ofstream(o.json_out) << out.dump(2) << "\n";
    std::printf("%zu of %zu steps failed\n", failed, steps.size());
    return failed ? 1 : 0;
}
