// engines/kinds/vllm — vLLM's OpenAI server (`vllm serve`) as an engine kind; this file and its line in
// registry.cpp are all of it.
//
//   vllm serve <path> --host 127.0.0.1 --port <p> --served-model-name <name>
//        [--gpu-memory-utilization <f>] [--kv-cache-memory-bytes <b>] [--max-model-len <n>]
//        [--max-num-seqs <n>] <extra…>
//
// Two ways to size it. (a) `memory:` (or `vllm.gpu_memory_utilization`): loch reserves that and passes it as
// the fraction of the GPU's total. (b) `vllm.kv_cache_memory: 8GiB`: loch plans weights (the model folder's
// *.safetensors) + that KV budget + `vllm.overhead` (activations, CUDA graphs, the CUDA context; 4 GiB unless
// set), passes --kv-cache-memory-bytes (vLLM then skips its own profiling of the KV size) and, for vLLM's
// start-up check (free ≥ utilization × total), the reservation as the fraction. Either way two vLLMs, or a
// vLLM beside llama.cpp, never race for the same memory. After start its log says what it took ("Model
// loading took X GiB", "Available KV cache memory: X GiB", "Graph capturing finished …, took X GiB"): that
// is the measured floor, and NVML's per-process figure for its process group keeps the reservation true.
//
// Memory: vLLM takes `--gpu-memory-utilization × total` of its GPU up front (weights, activations, then the
// rest as KV cache) and refuses to start when less is free; its default (0.9–0.92) would take the whole
// card from every other model. So loch always passes the fraction, from the model's `memory:` (the
// reservation ÷ the device's probed total) or from `vllm.gpu_memory_utilization`, and reserves exactly
// that much: fraction × total, Source::configured. (vLLM before v0.21 adds CUDA-graph memory on top —
// ~1.3 GiB for a 70B; cover it with the device's `margin`.) Only the admitted GPU is visible to it; the run's
// secret is VLLM_API_KEY (vLLM then wants `Authorization: Bearer`, which loch sends; /health stays open).
// Readiness: GET /health (vLLM listens only once its engine is built). Slot context: max_model_len.
#include <cmath>
#include <filesystem>
#include <regex>
#include <stdexcept>

#include <fmt/format.h>

#include "core/memory.hpp"
#include "engines/flags/table.hpp"
#include "engines/kind.hpp"

namespace loch::engines {

namespace {

struct VllmSettings final : config::KindSettings {
    std::optional<double> gpu_memory_utilization;  // fraction of the GPU's total; else from `memory:`
    std::optional<std::uint32_t> max_model_len;    // tokens per request (prompt + output)
    std::optional<std::uint32_t> max_num_seqs;     // concurrent sequences: the slots unless `concurrency`
    std::optional<std::uint64_t> kv_cache_memory;  // bytes: plan weights + KV + overhead instead
    std::uint64_t overhead = 4 * kGiB;  // activations + CUDA graphs + context beside weights and KV
    std::uint32_t sleep_level = 0;      // 1 | 2: evicted by sleep mode instead of a stop
    std::vector<std::string> extra;     // appended verbatim, one argv entry each
    std::unique_ptr<config::KindSettings> clone() const override {
        return std::make_unique<VllmSettings>(*this);
    }
};

const VllmSettings& vllm_settings(const config::ModelConfig& m) {
    return config::settings_as<VllmSettings>(m);
}

// The model folder's weights: its *.safetensors files (a file path counts itself).
std::uint64_t weights_bytes(const std::filesystem::path& p) {
    std::error_code ec;
    if (!std::filesystem::is_directory(p, ec)) {
        const auto n = std::filesystem::file_size(p, ec);
        return ec ? 0 : n;
    }
    std::uint64_t total = 0;
    for (auto it = std::filesystem::directory_iterator(p, ec);
         !ec && it != std::filesystem::directory_iterator(); it.increment(ec))
        if (it->path().extension() == ".safetensors" && it->is_regular_file(ec)) total += it->file_size(ec);
    return total;
}

// With a KV budget: weights + KV + overhead.
std::optional<std::uint64_t> planned_bytes(const config::ModelConfig& m) {
    const auto& s = vllm_settings(m);
    if (!s.kv_cache_memory) return std::nullopt;
    return weights_bytes(m.path) + *s.kv_cache_memory + s.overhead;
}

// The fraction of `where`'s memory this model may take; nullopt on the CPU or when it cannot be known.
std::optional<double> utilization(const config::ModelConfig& m, const Placement& where) {
    if (where.backend == "cpu") return std::nullopt;
    auto bytes = m.memory_on(where.device);
    if (!bytes) bytes = planned_bytes(m);
    if (bytes && where.total_bytes > 0) return std::min(1.0, double(*bytes) / double(where.total_bytes));
    return vllm_settings(m).gpu_memory_utilization;
}

class VllmKind final : public Kind {
  public:
    std::string_view name() const override { return "vllm"; }
    std::string program() const override { return "vllm"; }
    std::string how_to_get() const override {
        return "vLLM's own install (pip install vllm) puts it on PATH";
    }
    bool needs_path() const override { return true; }  // a folder (Hugging Face layout) or a model file

    std::unique_ptr<config::KindSettings> initial_settings() const override {
        return std::make_unique<VllmSettings>();
    }

    config::Walker::Keys keys(config::Walker& w, config::KindSettings& into) const override {
        auto& s = dynamic_cast<VllmSettings&>(into);
        return {{"vllm", [&w, &s](auto&, auto& node, auto& path) {
                     w.walk(node, path,
                            {{"gpu_memory_utilization",
                              [&](auto&, auto& v, auto& k) {
                                  double f = 0;
                                  if (!v.IsScalar() || !YAML::convert<double>::decode(v, f) ||
                                      !(f > 0 && f <= 1)) {
                                      w.error(v, k,
                                              "expected a fraction of the GPU's memory in (0, 1], got " +
                                                  config::Walker::describe(v));
                                      return;
                                  }
                                  s.gpu_memory_utilization = f;
                              }},
                             {"max_model_len", w.integer_into(s.max_model_len, 16, 1 << 24)},
                             {"max_num_seqs", w.integer_into(s.max_num_seqs, 1, 4096)},
                             {"kv_cache_memory",
                              [&](auto&, auto& v, auto& k) {
                                  if (auto b = w.size(v, k, 16 * kMiB)) s.kv_cache_memory = *b;
                              }},
                             {"sleep_level", w.integer_into(s.sleep_level, 0, 2)},
                             {"overhead",
                              [&](auto&, auto& v, auto& k) {
                                  if (auto b = w.size(v, k)) s.overhead = *b;
                              }},
                             {"extra", [&](auto&, auto& v, auto& k) {
                                  auto xs = w.str_list(v, k);
                                  if (!xs) return;
                                  if (auto why = flags::refusal(flags::vllm(), *xs)) {
                                      w.error(v, k, *why);
                                      return;
                                  }
                                  s.extra = std::move(*xs);
                              }}});
                 }}};
    }

    void check(config::Walker& w, const YAML::Node& entry, const std::string& path, config::ModelConfig& m,
               bool) const override {
        // Without a fraction vLLM takes ~90 % of the card: say how much it may have instead.
        if (m.memory.empty() && !vllm_settings(m).gpu_memory_utilization && !vllm_settings(m).kv_cache_memory)
            w.error(entry, path,
                    "engine 'vllm' needs `memory:` (what it may take on its GPU, e.g. 20GiB), "
                    "`vllm.kv_cache_memory` (its KV budget: loch plans weights + KV + overhead) or "
                    "`vllm.gpu_memory_utilization` — vLLM's own default takes about 90 % of the card");
    }

    EngineSpec launch(const config::Config& cfg, const config::ModelConfig& m, const Placement& where,
                      std::uint16_t port) const override {
        const auto program = cfg.program(name());
        if (program.empty()) throw std::invalid_argument("no vllm program resolved in the config");
        const auto& s = vllm_settings(m);
        EngineSpec spec = base_spec(cfg, m, port);
        spec.kind = std::string(name());
        spec.argv = {program.string(),
                     "serve",
                     m.path.string(),
                     "--host",
                     "127.0.0.1",
                     "--port",
                     std::to_string(port),
                     "--served-model-name",
                     m.name};
        if (auto f = utilization(m, where))
            spec.argv.insert(spec.argv.end(),
                             {"--gpu-memory-utilization", fmt::format("{:.4f}", std::floor(*f * 1e4) / 1e4)});
        if (s.kv_cache_memory && where.backend != "cpu")
            spec.argv.insert(spec.argv.end(),
                             {"--kv-cache-memory-bytes", std::to_string(*s.kv_cache_memory)});
        if (s.max_model_len)
            spec.argv.insert(spec.argv.end(), {"--max-model-len", std::to_string(*s.max_model_len)});
        if (s.max_num_seqs)
            spec.argv.insert(spec.argv.end(), {"--max-num-seqs", std::to_string(*s.max_num_seqs)});
        if (s.sleep_level > 0 && where.backend != "cpu") spec.argv.push_back("--enable-sleep-mode");
        spec.argv.insert(spec.argv.end(), s.extra.begin(), s.extra.end());
        spec.health_path = "/health";
        spec.env = device_environment(where, true);
        spec.env["VLLM_API_KEY"] = spec.api_key;
        // /sleep and /wake_up are vLLM's development endpoints: only loch can reach this port.
        if (s.sleep_level > 0) spec.env["VLLM_SERVER_DEV_MODE"] = "1";
        return spec;
    }

    Footprint formula(const config::Config& cfg, const config::ModelConfig& m,
                      const std::vector<Placement>& devices) const override {
        Footprint fp;
        fp.source = Source::configured;
        fp.detail = "vLLM takes --gpu-memory-utilization × the GPU's total up front";
        for (const auto& d : devices) {
            Need n;
            n.device = d.device;
            n.slots = slots(m);
            n.ctx = vllm_settings(m).max_model_len.value_or(0) * n.slots;
            n.source = Source::configured;
            if (auto bytes = m.memory_on(d.device)) {
                n.bytes = *bytes;
                n.why = "configured memory for " + d.device;
            } else if (auto planned = planned_bytes(m)) {
                const auto& s = vllm_settings(m);
                n.bytes = *planned;
                n.weights_bytes = weights_bytes(m.path);
                n.kv_bytes = *s.kv_cache_memory;
                n.source = Source::formula;
                n.why = fmt::format("weights {} (*.safetensors) + KV {} + overhead {}",
                                    human_bytes(n.weights_bytes), human_bytes(n.kv_bytes),
                                    human_bytes(s.overhead));
                fp.source = Source::formula;
                fp.detail = n.why;
            } else if (auto f = utilization(m, d); f && d.total_bytes > 0) {
                n.bytes = static_cast<std::uint64_t>(std::ceil(*f * double(d.total_bytes)));
                n.why =
                    fmt::format("vllm.gpu_memory_utilization {} × {} total", *f, human_bytes(d.total_bytes));
            } else {
                n.bytes = d.total_bytes;  // a fraction of an unknown total: assume all of it
                n.why = "gpu_memory_utilization of a device whose total is unknown: all of it";
            }
            n.bytes += cfg.device(d.device).margin;
            fp.needs.push_back(n);
        }
        return fp;
    }

    std::optional<std::uint64_t> configured_slot_ctx(const config::ModelConfig& m) const override {
        const auto len = vllm_settings(m).max_model_len;
        return len ? std::optional<std::uint64_t>(*len) : std::nullopt;
    }

    boost::asio::awaitable<ReadyFacts> after_ready(boost::asio::any_io_executor, const EngineAddress&,
                                                   const config::ModelConfig& m) const override {
        ReadyFacts f;
        f.slot_ctx = configured_slot_ctx(m);
        if (f.slot_ctx) f.slot_ctx_source = "config vllm.max_model_len";
        co_return f;
    }

    // What vLLM's start-up lines say it took on the GPU: weights + KV cache + CUDA graphs (the CUDA context
    // and activations are not in them: the per-process measurement sees those).
    std::optional<MemoryFigure> measure(const std::vector<std::string>& log,
                                        const Placement& where) const override {
        if (where.backend == "cpu") return std::nullopt;
        static const std::regex weights(R"(Model loading took ([0-9.]+) ?GiB)");
        static const std::regex kv(
            R"((Available KV cache memory: ([0-9.]+) ?GiB|reserved ([0-9.]+) ?GiB memory for KV Cache))");
        static const std::regex graphs(R"(Graph capturing finished in [0-9.]+ secs?, took ([0-9.]+) ?GiB)");
        double w = 0, k = 0, g = 0;
        for (const auto& line : log) {
            std::smatch mt;
            if (std::regex_search(line, mt, weights)) w = std::stod(mt[1]);
            if (std::regex_search(line, mt, kv)) k = std::stod(mt[2].matched ? mt[2].str() : mt[3].str());
            if (std::regex_search(line, mt, graphs)) g = std::stod(mt[1]);
        }
        if (w == 0 && k == 0) return std::nullopt;
        return MemoryFigure{
            static_cast<std::uint64_t>((w + k + g) * double(kGiB)), Source::measured,
            fmt::format("vLLM log: weights {:.2f} GiB + KV cache {:.2f} GiB + CUDA graphs {:.2f} GiB", w, k,
                        g)};
    }

    std::uint32_t sleep_level(const config::ModelConfig& m) const override {
        return vllm_settings(m).sleep_level;
    }

    // Asleep, vLLM keeps its CUDA context, graphs and caches on the GPU (at most `overhead`: the per-process
    // measurement shows the truth once it has slept); level 1 keeps the weights in host RAM.
    SleepFootprint asleep(const config::ModelConfig& m, const Need& awake) const override {
        const auto& s = vllm_settings(m);
        SleepFootprint f;
        f.device_bytes = std::min(awake.bytes, s.overhead);
        f.host_bytes = s.sleep_level == 1 ? weights_bytes(m.path) : 0;
        f.why = fmt::format("asleep (level {}): context and graphs ≤ {} on the GPU{}", s.sleep_level,
                            human_bytes(f.device_bytes),
                            f.host_bytes ? ", weights " + human_bytes(f.host_bytes) + " in host RAM" : "");
        return f;
    }

    // POST /sleep?level=N (a query parameter: vLLM ignores a JSON body); waking a level-2 sleeper reloads
    // its weights from disk before its KV cache comes back.
    boost::asio::awaitable<bool> sleep(boost::asio::any_io_executor ex, const EngineAddress& to,
                                       std::uint32_t level) const override {
        const auto r = co_await engine_request(ex, to, "POST", "/sleep?level=" + std::to_string(level), "",
                                               std::chrono::seconds(120));
        co_return r.status == 200;
    }
    boost::asio::awaitable<bool> wake(boost::asio::any_io_executor ex, const EngineAddress& to,
                                      std::uint32_t level) const override {
        const std::chrono::seconds deadline(600);
        if (level < 2)
            co_return (co_await engine_request(ex, to, "POST", "/wake_up", "", deadline)).status == 200;
        const std::vector<std::pair<std::string, std::string>> steps{
            {"/wake_up?tags=weights", ""},
            {"/collective_rpc", R"({"method":"reload_weights"})"},
            {"/wake_up?tags=kv_cache", ""}};
        for (const auto& [target, body] : steps)
            if ((co_await engine_request(ex, to, "POST", target, body, deadline)).status != 200)
                co_return false;
        co_return true;
    }

    std::uint32_t slots(const config::ModelConfig& m) const override {
        return std::max<std::uint32_t>(
            1, m.concurrency != 0 ? m.concurrency : vllm_settings(m).max_num_seqs.value_or(1));
    }
};

}  // namespace

const Kind& vllm_kind() {
    static const VllmKind kind;
    return kind;
}

}  // namespace loch::engines
