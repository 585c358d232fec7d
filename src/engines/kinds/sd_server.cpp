// engines/kinds/sd_server — stable-diffusion.cpp's `sd-server` (images) as an engine kind; this file and its
// line in registry.cpp are all of it.
//
//   sd-server (-m <checkpoint> | --diffusion-model <path>) [--clip_l F] [--clip_g F] [--t5xxl F] [--llm F]
//             [--vae F | --taesd F] --listen-ip 127.0.0.1 --listen-port <p> -v -t <threads>
//             [--diffusion-fa] [--vae-tiling] [--vae-conv-direct] [--clip-on-cpu] [--vae-on-cpu]
//             [--offload-to-cpu] [--steps N] [--cfg-scale X] [--sampling-method S] [--scheduler S] <extra…>
//
// `path` is a single-file checkpoint (SD1.x, SDXL) — or, when a text encoder is named, the diffusion model of
// a split one (Flux). Relative component paths resolve against the model file's folder. sd-server has no
// health route: it opens its port once the weights are loaded (readiness = the port accepts). `-v` makes it
// print its buffer sizes; one generation runs at a time (it serializes them itself), so the model has one
// slot.
//
// Memory: the engine reserves its component files + the process (Source::formula, raised to what sd-server
// says it loaded); each request reserves its own compute — the largest phase at its W×H by sd.cpp's
// arithmetic — from grant until sd-server is done with it (it cannot cancel a running generation, so a
// client that hangs up does not end it). A request that can never fit beside the weights is refused at once
// with the numbers per component and what would make it fit; one above `max_size` is refused as well.
#include <cctype>
#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <regex>
#include <stdexcept>

#include <fmt/format.h>

#include "core/memory.hpp"
#include "engines/flags/table.hpp"
#include "engines/kind.hpp"
#include "plan/diffusion.hpp"

namespace loch::engines {

namespace {

namespace fs = std::filesystem;

struct SdSettings final : config::KindSettings {
    std::map<std::string, std::string> files;  // clip_l, clip_g, t5xxl, llm, vae, taesd → path as written
    plan::DiffusionOptions opts;  // diffusion_fa, vae_tiling, …: the planner's terms (gpu set per placement)
    std::uint32_t threads = 0;    // 0 = sd.cpp's default (its physical cores)
    std::uint32_t max_width = 2048, max_height = 2048;  // a cap on what is accepted at all
    std::optional<std::uint32_t> steps;                 // model defaults for requests that do not say
    std::optional<double> cfg_scale;
    std::optional<std::string> sampler, scheduler;
    std::vector<std::string> extra;
    // What the files hold (architecture, Flux's width, weights per component), read on first use.
    mutable std::optional<plan::DiffusionFiles> read;
    std::unique_ptr<config::KindSettings> clone() const override {
        return std::make_unique<SdSettings>(*this);
    }
};

const SdSettings& sd_settings(const config::ModelConfig& m) {
    return config::settings_as<SdSettings>(m);
}

constexpr const char* kComponents[] = {"clip_l", "clip_g", "t5xxl", "llm", "vae", "taesd"};

fs::path component(const config::ModelConfig& m, const std::string& written) {
    const fs::path p(written);
    return p.is_absolute() ? p : (m.path.parent_path() / p).lexically_normal();
}

bool split_model(const SdSettings& s) {
    return s.files.contains("clip_l") || s.files.contains("clip_g") || s.files.contains("t5xxl") ||
           s.files.contains("llm");
}

std::uint64_t size_of(const fs::path& p) {
    std::error_code ec;
    const auto n = fs::file_size(p, ec);
    return ec ? 0 : n;
}

const plan::DiffusionFiles& files_of(const config::ModelConfig& m) {
    const auto& s = sd_settings(m);
    if (!s.read) {
        std::vector<std::pair<std::string, fs::path>> parts;
        for (const auto& [key, written] : s.files) parts.emplace_back(key, component(m, written));
        s.read = plan::read_diffusion_files(m.path, parts);
    }
    return *s.read;
}

plan::DiffusionOptions options_of(const SdSettings& s, const Placement& where) {
    plan::DiffusionOptions o = s.opts;
    o.gpu = where.backend != "cpu";
    o.vulkan_block = plan::vulkan_block(where.backend, where.largest_allocation);
    return o;
}

// The size a request asks for: OpenAI's "WxH" or A1111's width/height (default 512²).
std::pair<std::uint64_t, std::uint64_t> request_size(const nlohmann::json& b) {
    std::uint64_t w = 512, h = 512;
    if (b.contains("size") && b["size"].is_string()) {
        const std::string sz = b["size"];
        if (const auto x = sz.find('x'); x != std::string::npos) {
            try {
                w = std::stoull(sz.substr(0, x));
                h = std::stoull(sz.substr(x + 1));
            } catch (const std::exception&) {
            }
        }
    }
    if (b.contains("width") && b["width"].is_number_unsigned()) w = b["width"].get<std::uint64_t>();
    if (b.contains("height") && b["height"].is_number_unsigned()) h = b["height"].get<std::uint64_t>();
    return {w, h};
}

// The longest text the encoder will read: the prompt or A1111's negative prompt (encoded one after the
// other).
std::uint64_t prompt_bytes(const nlohmann::json& b) {
    std::uint64_t most = 1;
    for (const char* key : {"prompt", "negative_prompt"})
        if (b.contains(key) && b[key].is_string())
            most = std::max<std::uint64_t>(most, b[key].get_ref<const std::string&>().size());
    return most;
}

// An edit without a size whose image's size could not be read generates at that unknown size: costed at
// the largest the model accepts (never under).
bool size_unknown(const nlohmann::json& b) {
    return !b.contains("size") && b.contains("image") && b["image"].is_object() &&
           !b["image"].contains("width");
}

// The last "<k>/<N> - <rate>s/it" (or "it/s") on a progress line, read backwards by hand: the line repeats
// its bar with \r for every step (and the load's for every tensor: tens of KiB), too long for std::regex.
std::optional<nlohmann::json> last_step(const std::string& l) {
    const auto s_it = l.rfind("s/it"), it_s = l.rfind("it/s");
    const bool per_it = s_it != std::string::npos && (it_s == std::string::npos || s_it > it_s);
    const auto unit = per_it ? s_it : it_s;
    if (unit == std::string::npos) return std::nullopt;
    const auto digits_before = [&](std::size_t end, bool dot) {
        std::size_t b = end;
        while (b > 0 && (std::isdigit(static_cast<unsigned char>(l[b - 1])) || (dot && l[b - 1] == '.'))) --b;
        return b;
    };
    const auto rb = digits_before(unit, true);
    if (rb == unit || rb < 3 || l.compare(rb - 3, 3, " - ") != 0) return std::nullopt;
    const auto ne = rb - 3, nb = digits_before(ne, false);
    if (nb == ne || nb == 0 || l[nb - 1] != '/') return std::nullopt;
    const auto ke = nb - 1, kb = digits_before(ke, false);
    if (kb == ke) return std::nullopt;
    const double step = std::strtod(l.substr(kb, ke - kb).c_str(), nullptr);
    const double steps = std::strtod(l.substr(nb, ne - nb).c_str(), nullptr);
    const double rate = std::strtod(l.substr(rb, unit - rb).c_str(), nullptr);
    const double spp = per_it ? rate : (rate > 0 ? 1.0 / rate : 0.0);
    return nlohmann::json{{"step", step},
                          {"steps", steps},
                          {"seconds_per_step", spp},
                          {"eta_s", std::max(0.0, (steps - step) * spp)}};
}

class SdServerKind final : public Kind {
  public:
    std::string_view name() const override { return "sd-server"; }
    std::string program() const override { return "sd-server"; }
    std::string how_to_get() const override { return "bash scripts/setup.sh --images builds it"; }
    bool needs_path() const override { return true; }
    std::optional<std::uint32_t> cpu_threads(const config::ModelConfig& m, const Placement& where,
                                             std::uint32_t cores, std::uint32_t) const override {
        const auto& s = sd_settings(m);
        // On a GPU the CPU computes the phases the flags put there (offload_to_cpu only moves weights).
        if (where.backend != "cpu" && !s.opts.clip_on_cpu && !s.opts.vae_on_cpu) return std::nullopt;
        return s.threads ? s.threads : cores;  // -t, else the engine's default
    }
    std::unique_ptr<config::KindSettings> initial_settings() const override {
        return std::make_unique<SdSettings>();
    }

    config::Walker::Keys keys(config::Walker& w, config::KindSettings& into) const override {
        auto& s = dynamic_cast<SdSettings&>(into);
        return {
            {"sd", [&w, &s](auto&, auto& node, auto& path) {
                 config::Walker::Keys k;
                 for (const char* c : kComponents)
                     k.push_back({c, [&w, &s, c](auto&, auto& v, auto& key) {
                                      if (auto p = w.str(v, key)) s.files[c] = *p;
                                  }});
                 const auto flag = [&w](bool& into_) {
                     return [&w, &into_](auto&, auto& v, auto& key) {
                         if (auto b = w.boolean(v, key)) into_ = *b;
                     };
                 };
                 k.push_back({"diffusion_fa", flag(s.opts.flash_attention)});
                 k.push_back({"vae_tiling", flag(s.opts.vae_tiling)});
                 k.push_back({"vae_conv_direct", flag(s.opts.vae_conv_direct)});
                 k.push_back({"clip_on_cpu", flag(s.opts.clip_on_cpu)});
                 k.push_back({"vae_on_cpu", flag(s.opts.vae_on_cpu)});
                 k.push_back({"offload_to_cpu", flag(s.opts.offload_to_cpu)});
                 k.push_back({"threads", w.integer_into(s.threads, 1, 1024)});
                 k.push_back({"max_size", [&w, &s](auto&, auto& v, auto& key) {
                                  auto t = w.str(v, key);
                                  if (!t) return;
                                  static const std::regex re(R"(([0-9]{2,5})x([0-9]{2,5}))");
                                  std::smatch m;
                                  if (!std::regex_match(*t, m, re)) {
                                      w.error(v, key,
                                              "expected WIDTHxHEIGHT (e.g. 1024x1024), got '" + *t + "'");
                                      return;
                                  }
                                  s.max_width = std::stoul(m[1]);
                                  s.max_height = std::stoul(m[2]);
                              }});
                 k.push_back({"steps", w.integer_into(s.steps, 1, 1000)});
                 k.push_back(
                     {"cfg_scale", [&w, &s](auto&, auto& v, auto& key) {
                          double x = 0;
                          if (!v.IsScalar() || !YAML::convert<double>::decode(v, x) || x < 0 || x > 100) {
                              w.error(v, key, "expected a number 0-100, got " + config::Walker::describe(v));
                              return;
                          }
                          s.cfg_scale = x;
                      }});
                 k.push_back({"sampler", [&w, &s](auto&, auto& v, auto& key) { s.sampler = w.str(v, key); }});
                 k.push_back(
                     {"scheduler", [&w, &s](auto&, auto& v, auto& key) { s.scheduler = w.str(v, key); }});
                 k.push_back({"extra", [&w, &s](auto&, auto& v, auto& key) {
                                  auto xs = w.str_list(v, key);
                                  if (!xs) return;
                                  if (auto why = flags::refusal(flags::sd_server(), *xs)) {
                                      w.error(v, key, *why);
                                      return;
                                  }
                                  s.extra = std::move(*xs);
                              }});
                 w.walk(node, path, k);
             }}};
    }

    void check(config::Walker& w, const YAML::Node& entry, const std::string& path, config::ModelConfig& m,
               bool check_files) const override {
        const auto& s = sd_settings(m);
        if (s.files.contains("vae") && s.files.contains("taesd"))
            w.error(entry, path, "sd: give `vae` or `taesd`, not both (sd-server decodes with one)");
        if (!check_files) return;
        for (const auto& [key, written] : s.files) {
            std::error_code ec;
            if (!fs::is_regular_file(component(m, written), ec))
                w.error(entry, path + ".sd." + key, "no such file: " + component(m, written).string());
        }
    }

    std::uint32_t slots(const config::ModelConfig&) const override { return 1; }

    bool cancels_on_disconnect() const override { return false; }  // a running generation cannot be stopped

    // "  |=======>      | 7/20 - 1.31s/it" (or "it/s"), repeated with \r on one line, after "generate_image".
    bool reports_progress() const override { return true; }
    std::optional<nlohmann::json> request_progress(const std::vector<std::string>& tail) const override {
        for (auto line = tail.rbegin(); line != tail.rend(); ++line) {
            if (auto p = last_step(*line)) return p;
            // The start of this generation ("generate_image 512x512"; not its "generate_image completed").
            if (line->find("generate_image ") != std::string::npos &&
                line->find("completed") == std::string::npos)
                return nlohmann::json{{"step", 0}};
        }
        return std::nullopt;
    }

    std::optional<RequestCost> request_cost(const config::ModelConfig& m,
                                            const RequestView& r) const override {
        if (r.body == nullptr || !r.body->is_object()) return std::nullopt;
        auto [asked_w, asked_h] = request_size(*r.body);
        if (size_unknown(*r.body)) asked_w = sd_settings(m).max_width, asked_h = sd_settings(m).max_height;
        const auto files = files_of(m);
        const bool gpu = r.where != nullptr && r.where->backend != "cpu";
        auto opts = options_of(sd_settings(m), r.where != nullptr ? *r.where : Placement{});
        opts.prompt_bytes = prompt_bytes(*r.body);
        const auto p = plan::plan_diffusion(files, opts, asked_w, asked_h);
        RequestCost c;
        c.bytes = p.device_compute;
        // Phases on the CPU (clip_on_cpu, vae_on_cpu): in host RAM — the device's own pool on an APU.
        if (gpu && p.host_compute > 0) {
            if (r.where->unified) {
                c.bytes += p.host_compute;
            } else {
                c.host_bytes = p.host_compute;
                c.host_why = fmt::format("compute on the CPU at {}x{}: {}", p.width, p.height,
                                         human_bytes(p.host_compute));
            }
        }
        // On a GPU, ggml-cuda's pool stays at its largest after the request ends.
        if (gpu) c.retained_bytes = p.device_pool;
        c.why = fmt::format("compute at {}x{}: {} ({})", p.width, p.height, human_bytes(p.device_compute),
                            p.largest_phase);
        if (!size_unknown(*r.body) && (p.width != asked_w || p.height != asked_h))
            c.notice = fmt::format(
                "{}x{} is generated as {}x{}: stable-diffusion.cpp rounds each side up to a "
                "multiple of {} px for this model",
                asked_w, asked_h, p.width, p.height, files.arch == plan::DiffusionArch::flux ? 16 : 64);
        nlohmann::json phases = nlohmann::json::array();
        for (const auto& ph : p.phases)
            phases.push_back({{"phase", ph.name},
                              {"bytes", ph.bytes},
                              {"formula", ph.formula},
                              {"on", ph.on_device ? "device" : "cpu"}});
        c.details = {{"width", p.width},
                     {"height", p.height},
                     {"architecture", plan::to_string(files.arch)},
                     {"compute_bytes", p.device_compute},
                     {"largest_phase", p.largest_phase},
                     {"phases", phases},
                     {"weights",
                      {{"text_encoders_bytes", files.text_encoder_bytes},
                       {"diffusion_model_bytes", files.diffusion_bytes},
                       {"decoder_bytes", files.vae_bytes},
                       {"on_device_bytes", p.device_weights},
                       {"on_cpu_bytes", p.host_weights}}}};
        c.largest_tensor = p.largest_tensor;
        c.largest_tensor_why = p.largest_tensor_phase + ": " + p.largest_tensor_what;
        c.details["largest_tensor_bytes"] = c.largest_tensor;
        c.details["largest_tensor"] = c.largest_tensor_why;
        const auto w = p.width, h = p.height;
        c.under_allocation = [files, opts, w, h](std::uint64_t limit) {
            return plan::options_under_allocation(files, opts, w, h, limit);
        };
        const bool unified = r.where != nullptr && r.where->unified;
        c.would_help = [files, opts, w, h, gpu, unified](std::uint64_t budget) {
            std::vector<std::string> out;
            if (const auto fit = plan::largest_fitting(files, opts, w, h, budget);
                fit && fit->first <= w && fit->second <= h && *fit != std::pair{w, h})
                out.push_back(fmt::format(
                    "a smaller image: it fits at {}x{} ({})", fit->first, fit->second,
                    human_bytes(plan::plan_diffusion(files, opts, fit->first, fit->second).device_compute)));
            for (auto& o : plan::options_that_fit(files, opts, w, h, budget)) out.push_back(std::move(o));
            // (On an APU the CPU's memory is the same RAM, in the same cgroup: moving it frees nothing.)
            if (gpu && !unified && files.text_encoder_bytes > 0 && !opts.clip_on_cpu &&
                plan::plan_diffusion(files, opts, w, h).device_compute <= budget + files.text_encoder_bytes)
                out.push_back(
                    fmt::format("the text encoders on the CPU (sd.clip_on_cpu: true) free {} on the device",
                                human_bytes(files.text_encoder_bytes)));
            return out;
        };
        return c;
    }

    std::vector<std::string> limits_that_never_fit(const config::Config& cfg, const config::ModelConfig& m,
                                                   const Placement& where,
                                                   std::uint64_t capacity) const override {
        const auto& s = sd_settings(m);
        plan::DiffusionFiles files;
        try {
            files = files_of(m);
        } catch (const std::exception&) {
            return {};  // unreadable files are said where they are read
        }
        const Footprint fp = formula(cfg, m, {where});
        if (fp.needs.empty()) return {};
        const std::uint64_t weights = fp.needs.front().bytes;
        const auto opts = options_of(s, where);
        const auto p = plan::plan_diffusion(files, opts, s.max_width, s.max_height);
        if (weights + p.device_compute <= capacity) return {};
        const std::uint64_t budget = capacity > weights ? capacity - weights : 0;
        const auto fit = plan::largest_fitting(files, opts, s.max_width, s.max_height, budget);
        return {fmt::format(
            "sd.max_size {}x{} needs {} beside its weights' {} on {}: {} > the {} it can ever give; {}",
            s.max_width, s.max_height, human_bytes(p.device_compute), human_bytes(weights), where.device,
            human_bytes(weights + p.device_compute), human_bytes(capacity),
            fit ? fmt::format("the largest that fits is {}x{} (sd.max_size: {}x{})", fit->first, fit->second,
                              fit->first, fit->second)
                : std::string("no size fits beside the weights: move the text encoders to the CPU "
                              "(sd.clip_on_cpu) or use smaller weights"))};
    }

    bool serves(const config::ModelConfig&, std::string_view route) const override {
        return route == "/v1/images/generations" || route == "/v1/images/edits" ||
               route == "/sdapi/v1/txt2img";
    }

    EngineSpec launch(const config::Config& cfg, const config::ModelConfig& m, const Placement& where,
                      std::uint16_t port) const override {
        const auto program = cfg.program(name(), where.backend);
        if (program.empty())
            throw std::invalid_argument("no sd-server build for " + where.backend + " (" + where.device +
                                        "): scripts/setup.sh --backend " + where.backend + " builds one");
        const auto& s = sd_settings(m);
        EngineSpec spec = base_spec(cfg, m, port);
        spec.kind = std::string(name());
        spec.argv = {program.string(), split_model(s) ? "--diffusion-model" : "-m", m.path.string()};
        for (const char* c : kComponents)
            if (auto it = s.files.find(c); it != s.files.end())
                spec.argv.insert(spec.argv.end(), {std::string("--") + c, component(m, it->second).string()});
        spec.argv.insert(spec.argv.end(),
                         {"--listen-ip", "127.0.0.1", "--listen-port", std::to_string(port), "-v"});
        if (s.threads) spec.argv.insert(spec.argv.end(), {"-t", std::to_string(s.threads)});
        const std::pair<bool, const char*> flags[] = {
            {s.opts.flash_attention, "--diffusion-fa"},    {s.opts.vae_tiling, "--vae-tiling"},
            {s.opts.vae_conv_direct, "--vae-conv-direct"}, {s.opts.clip_on_cpu, "--clip-on-cpu"},
            {s.opts.vae_on_cpu, "--vae-on-cpu"},           {s.opts.offload_to_cpu, "--offload-to-cpu"}};
        for (const auto& [on, f] : flags)
            if (on) spec.argv.push_back(f);
        if (s.steps) spec.argv.insert(spec.argv.end(), {"--steps", std::to_string(*s.steps)});
        if (s.cfg_scale) spec.argv.insert(spec.argv.end(), {"--cfg-scale", fmt::format("{}", *s.cfg_scale)});
        if (s.sampler) spec.argv.insert(spec.argv.end(), {"--sampling-method", *s.sampler});
        if (s.scheduler) spec.argv.insert(spec.argv.end(), {"--scheduler", *s.scheduler});
        spec.argv.insert(spec.argv.end(), s.extra.begin(), s.extra.end());
        spec.health_path.clear();  // no health route: the port opens after the weights are loaded
        spec.env = device_environment(where, true);
        return spec;
    }

    Footprint formula(const config::Config& cfg, const config::ModelConfig& m,
                      const std::vector<Placement>& devices) const override {
        const auto& s = sd_settings(m);
        std::uint64_t files = size_of(m.path);
        for (const auto& [key, written] : s.files) files += size_of(component(m, written));
        const std::uint64_t compute = 0;  // per request (request_cost)
        Footprint fp;
        fp.source = Source::formula;
        for (const auto& d : devices) {
            // On a GPU the placement flags keep components in RAM, and the CUDA/HIP context comes on top.
            const bool gpu = d.backend != "cpu";
            const auto placed = plan::plan_diffusion(files_of(m), options_of(s, d), 64, 64);
            // Components the flags keep in RAM: the host's (booked on `cpu`), or the APU's one pool.
            const std::uint64_t host = gpu ? placed.host_weights : 0;
            const std::uint64_t weights =
                gpu ? placed.device_weights + (d.unified ? host : 0) : std::max(files, placed.device_weights);
            const std::uint64_t kProcess = plan::diffusion_process_bytes(files_of(m), gpu);
            fp.detail = fmt::format("{} {} + {} {} (each request reserves its compute)",
                                    gpu ? "weights on the device" : "component files", human_bytes(weights),
                                    gpu ? "GPU context" : "process", human_bytes(kProcess));
            Need n;
            n.device = d.device;
            n.weights_bytes = weights;
            n.slots = 1;
            if (auto conf = m.memory_on(d.device); conf && *conf > weights + compute + kProcess) {
                n.bytes = *conf;
                n.source = Source::configured;
                n.why = "configured memory for " + d.device;
            } else {
                n.bytes = weights + compute + kProcess;
                n.source = Source::formula;
                n.why = fp.detail;
            }
            n.bytes += cfg.device(d.device).margin;
            if (host > 0 && !d.unified) {
                n.host_bytes = host;
                n.host_why = fmt::format("components kept in RAM by the sd flags: {}", human_bytes(host));
            }
            fp.needs.push_back(n);
        }
        return fp;
    }

    // "total params memory size = 2035.00MB (VRAM 0.00MB, RAM 2035.00MB)" — what it loaded (MB is MiB).
    std::optional<MemoryFigure> measure(const std::vector<std::string>& log,
                                        const Placement& where) const override {
        static const std::regex re(
            R"(total params memory size = ([0-9.]+)MB \(VRAM ([0-9.]+)MB, RAM ([0-9.]+)MB\))");
        for (const auto& line : log) {
            std::smatch mt;
            if (!std::regex_search(line, mt, re)) continue;
            const double mib = std::stod(where.backend == "cpu" ? mt[3].str() : mt[2].str());
            return MemoryFigure{
                static_cast<std::uint64_t>(mib * double(kMiB)), Source::measured,
                "sd-server log: params on " + where.device + " (compute buffers come per request)"};
        }
        return std::nullopt;
    }

    // Above what the reservation was made for: refused from the config alone, before the request waits in the
    // queue or sd-server starts (it would not say no). The advice names sizes within max_size only.
    std::optional<Refusal> check_before_start(const config::ModelConfig& m,
                                              const RequestView& r) const override {
        if (r.body == nullptr || !r.body->is_object()) return std::nullopt;
        const auto& s = sd_settings(m);
        const auto files = files_of(m);
        const auto asked = request_size(*r.body);
        const auto [w, h] = plan::aligned_size(files.arch, asked.first, asked.second);
        if (w <= s.max_width && h <= s.max_height) return std::nullopt;
        const auto compute = [&](std::uint64_t x, std::uint64_t y) {
            return plan::plan_diffusion(files, options_of(s, Placement{}), x, y).device_compute;
        };
        // The same shape within max_size: each side scaled down by the larger overshoot.
        const double scale = std::min(double(s.max_width) / double(w), double(s.max_height) / double(h));
        const auto [fw, fh] = plan::aligned_size(files.arch, std::uint64_t(double(w) * scale) / 64 * 64,
                                                 std::uint64_t(double(h) * scale) / 64 * 64);
        return Refusal{
            Refusal::Kind::invalid_request,
            fmt::format(
                "{}x{} is larger than the model's max_size {}x{}: its compute at {}x{} would need {} "
                "(at {}x{}: {}); ask for at most {}x{} (e.g. {}x{} for this shape), or raise sd.max_size "
                "in loch.yaml",
                w, h, s.max_width, s.max_height, w, h, human_bytes(compute(w, h)), s.max_width, s.max_height,
                human_bytes(compute(s.max_width, s.max_height)), s.max_width, s.max_height,
                std::min<std::uint64_t>(fw, s.max_width), std::min<std::uint64_t>(fh, s.max_height)),
            {{"width", w},
             {"height", h},
             {"max_width", s.max_width},
             {"max_height", s.max_height},
             {"compute_bytes", compute(w, h)}}};
    }
};

}  // namespace

const Kind& sd_server_kind() {
    static const SdServerKind kind;
    return kind;
}

}  // namespace loch::engines
