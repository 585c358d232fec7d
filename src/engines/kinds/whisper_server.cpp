// engines/kinds/whisper_server — whisper.cpp's `whisper-server` (speech to text) as an engine kind; this file
// and its line in registry.cpp are all of it.
//
//   whisper-server -m <model.bin> --host 127.0.0.1 --port <p> -t <threads> [-ng] [-nfa] [-p N] [-l LANG]
//                  <extra…>
//
// API: OpenAI's POST /v1/audio/transcriptions and /v1/audio/translations (multipart: file, model, language,
// prompt, response_format, temperature, …) both go to whisper-server's one inference path; a translation
// carries the form field translate=true, which loch appends to the client's form. Readiness: GET /health
// (whisper-server opens its port once the model is loaded). One request at a time (it holds one mutex).
//
// Memory (plan/whisper.hpp): whisper.cpp allocates weights, KV caches and compute buffers at start from the
// model's shape; the decoder KV is reallocated at (decoders + 2)× the first time a request runs beam search
// or several best_of candidates — so the reservation is planned for `whisper.max_decoders`, and a request
// asking for more is refused before it is sent. Measured: the lines whisper-server prints (MB of 10^6).
// Uploads: over `whisper.max_upload` → 413; a WAV longer than `whisper.max_duration` → 400. On the CPU each
// request reserves its decoded audio (PCM f32 + log-mel) beside the engine.
#include <filesystem>
#include <regex>
#include <stdexcept>
#include <thread>

#include <fmt/format.h>

#include "core/memory.hpp"
#include "engines/flags/table.hpp"
#include "engines/kind.hpp"
#include "plan/whisper.hpp"

namespace loch::engines {

namespace {

namespace fs = std::filesystem;

constexpr std::string_view kInferencePath = "/inference";
constexpr std::uint32_t kWhisperMaxDecoders = 8;  // WHISPER_MAX_DECODERS

struct WhisperSettings final : config::KindSettings {
    std::uint32_t threads = 0;  // 0: whisper-server's default (min(4, cores))
    bool flash_attention = true;
    std::uint32_t max_decoders = 5;  // best_of / beam_size a request may ask for
    std::uint32_t processors = 1;
    std::uint64_t max_upload = 25ull << 20;  // OpenAI's own limit is 25 MB
    std::uint32_t max_duration_s = 3 * 3600;
    std::optional<std::string> language;  // -l; whisper-server's default is "en"
    std::vector<std::string> extra;
    mutable std::optional<gguf::WhisperHparams> hp;  // read from the file on first use
    std::unique_ptr<config::KindSettings> clone() const override {
        return std::make_unique<WhisperSettings>(*this);
    }
};

const WhisperSettings& whisper_settings(const config::ModelConfig& m) {
    return config::settings_as<WhisperSettings>(m);
}

// The hyper-parameters: only the header is read (the file may be gigabytes).
const gguf::WhisperHparams& hparams_of(const config::ModelConfig& m) {
    const auto& s = whisper_settings(m);
    if (!s.hp) s.hp = plan::read_whisper_hparams(m.path);
    return *s.hp;
}

plan::WhisperOptions options_of(const WhisperSettings& s, bool gpu) {
    return {gpu, s.flash_attention, s.max_decoders, s.processors};
}

// A form field as a number (form_as_json keeps non-integers as strings).
std::optional<double> number_field(const nlohmann::json& b, const char* key) {
    const auto f = b.find(key);
    if (f == b.end()) return std::nullopt;
    if (f->is_number()) return f->get<double>();
    if (!f->is_string()) return std::nullopt;
    try {
        return std::stod(f->get<std::string>());
    } catch (const std::exception&) {
        return std::nullopt;
    }
}

class WhisperServerKind final : public Kind {
  public:
    std::string_view name() const override { return "whisper-server"; }
    std::string program() const override { return "whisper-server"; }
    std::string how_to_get() const override { return "bash scripts/setup.sh --speech builds it"; }
    bool needs_path() const override { return true; }
    std::optional<std::uint32_t> cpu_threads(const config::ModelConfig& m, const Placement& where,
                                             std::uint32_t cores, std::uint32_t) const override {
        if (where.backend != "cpu") return std::nullopt;  // the encoder and decoder run on the GPU
        const auto t = whisper_settings(m).threads;
        return t ? t : std::min<std::uint32_t>(4, cores);  // -t, else the engine's default
    }
    std::unique_ptr<config::KindSettings> initial_settings() const override {
        return std::make_unique<WhisperSettings>();
    }

    config::Walker::Keys keys(config::Walker& w, config::KindSettings& into) const override {
        auto& s = dynamic_cast<WhisperSettings&>(into);
        return {{"whisper", [&w, &s](auto&, auto& node, auto& path) {
                     w.walk(node, path,
                            {{"threads", w.integer_into(s.threads, 1, 1024)},
                             {"flash_attention",
                              [&](auto&, auto& v, auto& k) {
                                  if (auto b = w.boolean(v, k)) s.flash_attention = *b;
                              }},
                             {"max_decoders", w.integer_into(s.max_decoders, 1, kWhisperMaxDecoders)},
                             {"processors", w.integer_into(s.processors, 1, 16)},
                             {"max_upload",
                              [&](auto&, auto& v, auto& k) {
                                  if (auto b = w.size(v, k, 1024)) s.max_upload = *b;
                              }},
                             {"max_duration",
                              [&](auto&, auto& v, auto& k) {
                                  if (auto d = w.duration(v, k, std::chrono::seconds{1}))
                                      s.max_duration_s = static_cast<std::uint32_t>(d->count());
                              }},
                             {"language", [&](auto&, auto& v, auto& k) { s.language = w.str(v, k); }},
                             {"extra", [&](auto&, auto& v, auto& k) {
                                  auto xs = w.str_list(v, k);
                                  if (!xs) return;
                                  if (auto why = flags::refusal(flags::whisper_server(), *xs)) {
                                      w.error(v, k, *why);
                                      return;
                                  }
                                  s.extra = std::move(*xs);
                              }}});
                 }}};
    }

    void check(config::Walker& w, const YAML::Node& entry, const std::string& path, config::ModelConfig& m,
               bool check_files) const override {
        if (!check_files) return;
        try {
            (void)hparams_of(m);
        } catch (const std::exception& e) {
            const YAML::Node at = entry["path"];
            w.error(at.IsDefined() ? at : entry, path + ".path",
                    fmt::format("not a whisper.cpp model (ggml-*.bin): {}", e.what()));
        }
    }

    std::uint32_t slots(const config::ModelConfig&) const override { return 1; }  // one mutex

    bool serves(const config::ModelConfig&, std::string_view route) const override {
        return route == "/v1/audio/transcriptions" || route == "/v1/audio/translations";
    }
    // Its answers carry no model name.
    bool names_model_as_configured() const override { return true; }

    std::string upstream(std::string_view route, std::string_view content_type,
                         std::string& body) const override {
        if (route != "/v1/audio/translations") return std::string(kInferencePath);
        // The form's closing delimiter is "--<boundary>--": the field goes in just before it.
        static const std::regex re(R"(boundary=\"?([^\";]+)\"?)");
        std::cmatch mt;
        const std::string ct(content_type);
        if (!std::regex_search(ct.c_str(), mt, re)) return std::string(kInferencePath);
        const std::string close = "--" + mt[1].str() + "--";
        if (const auto at = body.rfind(close); at != std::string::npos)
            body.insert(at, "--" + mt[1].str() +
                                "\r\nContent-Disposition: form-data; name=\"translate\"\r\n\r\ntrue\r\n");
        return std::string(kInferencePath);
    }

    EngineSpec launch(const config::Config& cfg, const config::ModelConfig& m, const Placement& where,
                      std::uint16_t port) const override {
        const auto program = cfg.program(name(), where.backend);
        if (program.empty())
            throw std::invalid_argument("no whisper-server build for " + where.backend + " (" + where.device +
                                        "): scripts/setup.sh --backend " + where.backend + " builds one");
        const auto& s = whisper_settings(m);
        EngineSpec spec = base_spec(cfg, m, port);
        spec.kind = std::string(name());
        spec.argv = {program.string(), "-m",     m.path.string(),     "--host",
                     "127.0.0.1",      "--port", std::to_string(port)};
        if (s.threads) spec.argv.insert(spec.argv.end(), {"-t", std::to_string(s.threads)});
        if (where.backend == "cpu") spec.argv.push_back("-ng");
        spec.argv.push_back(s.flash_attention ? "-fa" : "-nfa");
        if (s.processors > 1) spec.argv.insert(spec.argv.end(), {"-p", std::to_string(s.processors)});
        if (s.language) spec.argv.insert(spec.argv.end(), {"-l", *s.language});
        spec.argv.insert(spec.argv.end(), s.extra.begin(), s.extra.end());
        spec.health_path = "/health";
        spec.env = device_environment(where, true);
        return spec;
    }

    Footprint formula(const config::Config& cfg, const config::ModelConfig& m,
                      const std::vector<Placement>& devices) const override {
        const auto& s = whisper_settings(m);
        Footprint fp;
        fp.source = Source::formula;
        for (const auto& d : devices) {
            const auto p = plan::plan_whisper(hparams_of(m), options_of(s, d.backend != "cpu"));
            fp.detail =
                fmt::format("weights {} + KV {} (for {} decoders) + compute {} + {} {}",
                            human_bytes(p.weights), human_bytes(p.kv), s.max_decoders, human_bytes(p.compute),
                            d.backend != "cpu" ? "GPU context" : "process", human_bytes(p.process));
            Need n;
            n.device = d.device;
            n.weights_bytes = p.weights;
            n.kv_bytes = p.kv;
            n.layers = static_cast<std::uint32_t>(hparams_of(m).n_text_layer);
            n.slots = 1;
            if (auto conf = m.memory_on(d.device); conf && *conf > p.total) {
                n.bytes = *conf;
                n.source = Source::configured;
                n.why = "configured memory for " + d.device;
            } else {
                n.bytes = p.total;
                n.why = fp.detail;
            }
            n.bytes += cfg.device(d.device).margin;
            fp.needs.push_back(n);
        }
        return fp;
    }

    // whisper-server's own lines (MB = 10^6 bytes): weights per buffer, the three KV caches, four compute
    // buffers. The KV self it prints is for one decoder: the reallocation for max_decoders comes on top.
    std::optional<MemoryFigure> measure(const std::vector<std::string>& log,
                                        const Placement& where) const override {
        static const std::regex re(
            R"((total size|kv self size|kv cross size|kv pad  size|compute buffer \([a-z]+\)) *= *([0-9.]+) MB)");
        double mb = 0, self = 0;
        bool any = false;
        for (const auto& line : log) {
            std::smatch mt;
            if (!std::regex_search(line, mt, re)) continue;
            const double v = std::stod(mt[2].str());
            mb += v;
            if (mt[1] == "kv self size") self = v;
            any = true;
        }
        if (!any) return std::nullopt;
        (void)where;
        return MemoryFigure{
            static_cast<std::uint64_t>(mb * 1e6), Source::measured,
            fmt::format("whisper-server log: weights + KV + compute buffers (kv self {:.2f} MB "
                        "at one decoder)",
                        self)};
    }

    std::optional<RequestCost> request_cost(const config::ModelConfig& m,
                                            const RequestView& r) const override {
        // On a GPU the audio lives in host RAM, outside the device's ledger; on the CPU it is the device.
        if (r.body == nullptr || r.where == nullptr || r.where->backend != "cpu") return std::nullopt;
        const auto file = r.body->find("file");
        if (file == r.body->end() || !file->is_object()) return std::nullopt;
        const auto upload = file->value("file_bytes", std::uint64_t{0});
        const auto& s = whisper_settings(m);
        // A length the header does not tell is costed at the longest accepted (never under).
        const double seconds =
            file->contains("seconds") ? (*file)["seconds"].get<double>() : s.max_duration_s;
        RequestCost c;
        c.bytes = plan::whisper_audio_bytes(upload, seconds, hparams_of(m).n_mels);
        c.why = fmt::format("audio of {:.0f} s{}: {} (upload + PCM + log-mel)", seconds,
                            file->contains("seconds") ? "" : " (at most)", human_bytes(c.bytes));
        c.details = {{"upload_bytes", upload}, {"audio_seconds", seconds}, {"audio_bytes", c.bytes}};
        return c;
    }

    std::optional<std::uint64_t> max_upload(const config::ModelConfig& m) const override {
        return whisper_settings(m).max_upload;
    }

    std::optional<Refusal> check_before_start(const config::ModelConfig& m,
                                              const RequestView& r) const override {
        if (r.body == nullptr || !r.body->is_object()) return std::nullopt;
        const auto& s = whisper_settings(m);
        const auto file = r.body->find("file");
        if (file != r.body->end() && file->is_object()) {
            // whisper-server reads WAV, MP3, FLAC and Ogg (miniaudio); anything else got its bare text/plain
            // "Invalid request", which a client's SDK shows as no reason at all.
            const std::string format = file->value("format", "");
            if (format != "wav" && format != "mp3" && format != "flac" && format != "ogg")
                return Refusal{
                    Refusal::Kind::invalid_request,
                    fmt::format(
                        "the uploaded file '{}' is not audio whisper-server can read ({}): "
                        "send WAV, MP3, FLAC or Ogg",
                        file->value("filename", ""),
                        format.empty() ? "its first bytes are no known audio format" : "it is " + format),
                    {{"format", format.empty() ? nlohmann::json(nullptr) : nlohmann::json(format)},
                     {"accepted", {"wav", "mp3", "flac", "ogg"}}}};
            const auto upload = file->value("file_bytes", std::uint64_t{0});
            if (upload > s.max_upload)
                return Refusal{Refusal::Kind::too_large,
                               fmt::format("the audio file is {} ({} bytes), over this model's max_upload of "
                                           "{}; send a shorter or compressed file, or raise "
                                           "whisper.max_upload in loch.yaml",
                                           human_bytes(upload), upload, human_bytes(s.max_upload)),
                               {{"upload_bytes", upload}, {"max_upload_bytes", s.max_upload}}};
            if (file->contains("seconds") && (*file)["seconds"].get<double>() > s.max_duration_s)
                return Refusal{
                    Refusal::Kind::invalid_request,
                    fmt::format("the audio is {:.0f} s long, over this model's max_duration of {} s; "
                                "split it, or raise whisper.max_duration in loch.yaml",
                                (*file)["seconds"].get<double>(), s.max_duration_s),
                    {{"audio_seconds", (*file)["seconds"]}, {"max_duration_s", s.max_duration_s}}};
        }
        // More decoders than the reservation was planned for would reallocate the KV beyond it.
        for (const char* key : {"best_of", "beam_size"})
            if (const auto n = number_field(*r.body, key); n && *n > s.max_decoders)
                return Refusal{
                    Refusal::Kind::invalid_request,
                    fmt::format(
                        "{} {:g} is more than this model's max_decoders {} (its memory is planned for that "
                        "many: whisper.cpp reallocates the decoder KV at decoders + 2); ask for at most "
                        "{}, or raise whisper.max_decoders in loch.yaml (≤ {})",
                        key, *n, s.max_decoders, s.max_decoders, kWhisperMaxDecoders),
                    {{key, static_cast<std::int64_t>(*n)}, {"max_decoders", s.max_decoders}}};
        return std::nullopt;
    }
};

}  // namespace

const Kind& whisper_server_kind() {
    static const WhisperServerKind kind;
    return kind;
}

}  // namespace loch::engines
