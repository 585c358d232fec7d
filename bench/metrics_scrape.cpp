// metrics-scrape: is /metrics cheap enough for an endpoint picker that scrapes every box every 50 ms?
// (issue 30). One `loch serve` with N configured models (not started: their status rows are what /metrics
// renders) and a synthetic model file; K scrapes of /metrics, then K requests to /health on the same
// connection pattern as the baseline, measured side by side in one run. Figures: wall time per request and
// loch's CPU time per request (utime + stime from /proc), the ratio to /health, and what scraping every
// 50 ms costs loch in share of one core.
//
//   metrics-scrape --loch build/bin/loch --synth build/bin/loch-synth --work /tmp/metrics-scrape
//                  [--models 8] [--scrapes 2000]
// Exit status 0 when it ran (the figures are reported, not enforced: a bench, not a test).
#include <unistd.h>

#include <CLI/CLI.hpp>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include <fmt/format.h>

#include "support/engine_process.hpp"
#include "support/http_client.hpp"
#include "support/process.hpp"

namespace fs = std::filesystem;
using Clock = std::chrono::steady_clock;

namespace {

// loch's CPU time so far (utime + stime, seconds).
double cpu_seconds(int pid) {
    std::ifstream in("/proc/" + std::to_string(pid) + "/stat");
    std::string stat((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    std::istringstream rest(stat.substr(stat.rfind(')') + 2));
    std::vector<std::string> f;
    for (std::string x; rest >> x;) f.push_back(x);
    if (f.size() < 13) return 0;
    return double(std::stoull(f[11]) + std::stoull(f[12])) / double(::sysconf(_SC_CLK_TCK));
}

struct Figures {
    double wall_ms = 0, cpu_ms = 0;
    std::size_t bytes = 0;
};

Figures measure(std::uint16_t port, int pid, const std::string& target, int n) {
    Figures f;
    const double cpu0 = cpu_seconds(pid);
    const auto t0 = Clock::now();
    for (int i = 0; i < n; ++i) {
        const auto r = loch::test::http_get(port, target, std::chrono::seconds(10));
        if (r.status != 200) throw std::runtime_error(target + " answered " + std::to_string(r.status));
        f.bytes = r.body.size();
    }
    f.wall_ms = std::chrono::duration<double, std::milli>(Clock::now() - t0).count() / n;
    f.cpu_ms = (cpu_seconds(pid) - cpu0) * 1000.0 / n;
    return f;
}

}  // namespace

int main(int argc, char** argv) {
    CLI::App app{"/metrics' cost per scrape against /health, side by side"};
    std::string loch, synth, work = "/tmp/metrics-scrape";
    int models = 8, scrapes = 2000;
    app.add_option("--loch", loch, "the loch binary")->required();
    app.add_option("--synth", synth, "the loch-synth binary")->required();
    app.add_option("--work", work, "a scratch folder");
    app.add_option("--models", models, "configured models");
    app.add_option("--scrapes", scrapes, "requests per route");
    CLI11_PARSE(app, argc, argv);

    fs::remove_all(work);
    fs::create_directories(work);
    const fs::path model = fs::path(work) / "m.gguf";
    if (loch::test::run_to_completion(
            synth, {"--preset", "tiny-llama", "--weights", "small", "--out", model.string()},
            fs::path(work) / "synth.log", std::chrono::seconds(120)) != 0) {
        std::fprintf(stderr, "loch-synth failed (%s)\n", (fs::path(work) / "synth.log").c_str());
        return 1;
    }
    std::string yaml = "listen: 127.0.0.1\nstate_dir: " + (fs::path(work) / "state").string() + "\nmodels:\n";
    for (int i = 0; i < models; ++i)
        yaml += fmt::format("  - name: m{}\n    path: {}\n    args: {{ctx: 2048}}\n", i, model.string());
    std::ofstream(fs::path(work) / "loch.yaml") << yaml;
    const auto port = loch::test::free_port();
    loch::test::Process serve(
        loch, {"serve", "--config", (fs::path(work) / "loch.yaml").string(), "--port", std::to_string(port)},
        fs::path(work) / "loch.log");
    for (int i = 0; i < 200; ++i) {
        try {
            if (loch::test::http_get(port, "/health", std::chrono::seconds(1)).status == 200) break;
        } catch (const std::exception&) {
        }
        std::this_thread::sleep_for(std::chrono::milliseconds(50));
    }
    measure(port, serve.pid(), "/metrics", 50);  // warm-up
    measure(port, serve.pid(), "/health", 50);
    const Figures m = measure(port, serve.pid(), "/metrics", scrapes);
    const Figures h = measure(port, serve.pid(), "/health", scrapes);
    std::printf("metrics-scrape: %d configured models, %d requests per route, one connection per request\n",
                models, scrapes);
    std::printf("  /metrics: %.3f ms wall, %.3f ms of loch's CPU per scrape (%zu bytes)\n", m.wall_ms,
                m.cpu_ms, m.bytes);
    std::printf("  /health:  %.3f ms wall, %.3f ms of loch's CPU per request\n", h.wall_ms, h.cpu_ms);
    std::printf("  ratio /metrics ÷ /health: %.2fx wall, %.2fx CPU\n", m.wall_ms / h.wall_ms,
                h.cpu_ms > 0 ? m.cpu_ms / h.cpu_ms : 0.0);
    std::printf("  one picker scraping every 50 ms costs loch %.2f %% of one core\n",
                m.cpu_ms / 50.0 * 100.0);
    serve.stop(std::chrono::seconds(20));
    return 0;
}
