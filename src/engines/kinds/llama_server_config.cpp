// The llama-server kind's config: the `args:` section of a model entry, and its checks.
#include <algorithm>
#include <charconv>
#include <fstream>

#include <fmt/format.h>

#include "engines/flags/table.hpp"
#include "engines/kinds/llama_server.hpp"
#include "gguf/reader.hpp"
#include "gguf/summary.hpp"
#include "plan/shape.hpp"

namespace loch::engines {

namespace {

// A file an entry names beside its model (a projector, an adapter, a draft) must be a regular file; else the
// error says where a relative one is looked for.
bool beside_model_file(config::Walker& w, const YAML::Node& entry, const std::string& key,
                       const std::filesystem::path& file, std::string_view what) {
    std::error_code ec;
    if (std::filesystem::is_regular_file(file, ec)) return true;
    w.error(entry, key,
            file.string() + " is not a regular file (a relative " + std::string(what) +
                " is beside the model file)");
    return false;
}

const std::vector<std::string> kCacheTypes = {"f32",  "f16",    "bf16", "q8_0", "q4_0",
                                              "q4_1", "iq4_nl", "q5_0", "q5_1"};
void cache_type(config::Walker& w, const YAML::Node& v, const std::string& k,
                std::optional<std::string>& out) {
    const auto s = w.str(v, k);
    if (!s) return;
    const std::string t = config::ascii_lower(*s);
    if (std::find(kCacheTypes.begin(), kCacheTypes.end(), t) == kCacheTypes.end()) {
        w.error(v, k,
                "unknown cache type '" + *s + "' (llama-server accepts " + config::quoted_list(kCacheTypes) +
                    ")");
        return;
    }
    out = t;
}

}  // namespace

std::optional<std::string> read_extra_plan_flags(const std::vector<std::string>& extra, ExtraPlanFlags& out) {
    auto read = flags::read_extra(flags::llama_server(), extra);
    if (auto* refused = std::get_if<std::string>(&read)) return *refused;
    const auto number = [](const flags::ExtraFlag& f) -> std::optional<std::uint32_t> {
        std::uint32_t n = 0;
        const std::string& v = f.values.at(0);
        if (std::from_chars(v.data(), v.data() + v.size(), n).ec != std::errc()) return std::nullopt;
        return n;
    };
    for (const auto& f : std::get<std::vector<flags::ExtraFlag>>(read)) {
        if (f.rule->cls != flags::FlagClass::planned) continue;
        const auto& canonical = f.rule->names;
        const auto is = [&](std::string_view n) {
            return std::find(canonical.begin(), canonical.end(), n) != canonical.end();
        };
        const auto said = [&](std::initializer_list<std::string_view> spellings) {
            return std::find(spellings.begin(), spellings.end(), f.name) != spellings.end();
        };
        if (is("--kv-unified")) {
            out.kv_unified = !said({"-no-kvu", "--no-kv-unified"});
        } else if (is("--swa-full")) {
            out.swa_full = true;
        } else if (is("--no-repack")) {
            out.no_repack = !said({"--repack"});
        } else if (is("--cpu-moe")) {
            out.cpu_moe = true;
        } else if (is("--n-cpu-moe")) {
            const auto n = number(f);
            if (!n) return "'" + f.name + "' needs a number of layers";
            out.n_cpu_moe = *n;
        } else if (is("--embedding")) {
            out.embedding = true;
        } else if (is("--rerank")) {
            out.embedding = true;
            out.pooling = "rank";
        } else if (is("--pooling")) {
            const std::string& v = f.values.at(0);
            if (v != "none" && v != "mean" && v != "cls" && v != "last" && v != "rank")
                return "'--pooling " + v + "': llama-server takes none, mean, cls, last or rank";
            out.pooling = v;
        } else if (is("--override-tensor")) {
            const std::string& v = f.values.at(0);
            // A list: PATTERN=BUFFER,PATTERN=BUFFER. Only the host is a buffer loch can plan: which GPU a
            // tensor goes to is placement, and placement is loch's.
            std::string_view rest = v;
            while (!rest.empty()) {
                const auto comma = rest.find(',');
                const std::string_view item = rest.substr(0, comma);
                const auto at = item.rfind('=');
                const std::string buffer =
                    at == std::string_view::npos ? "" : config::ascii_lower(std::string(item.substr(at + 1)));
                if (at == std::string_view::npos || at == 0)
                    return "'" + f.name + " " + v + "': each item is <tensor name pattern>=<buffer type>";
                if (buffer != "cpu")
                    return "'" + f.name + " " + std::string(item) +
                           "': loch plans tensors overridden to the CPU only (=CPU); which GPU holds what is "
                           "loch's placement";
                out.cpu_tensor_patterns.emplace_back(item.substr(0, at));
                rest = comma == std::string_view::npos ? std::string_view() : rest.substr(comma + 1);
            }
        } else {
            // A flag classed `planned` in the table with no reading here is a reservation nobody computed.
            return "'" + f.name + "' is refused: loch's planner does not read it yet";
        }
    }
    return std::nullopt;
}

std::string_view to_string(FlashAttn f) {
    switch (f) {
        case FlashAttn::on:
            return "on";
        case FlashAttn::off:
            return "off";
        case FlashAttn::auto_:
            return "auto";
    }
    return "auto";
}

const LlamaArgs& llama_args(const config::ModelConfig& model) {
    return config::settings_as<LlamaArgs>(model);
}

namespace {

// The YaRN stretch that RoPE flags in args.extra ask for: llama.cpp re-sizes the training context to
// yarn_orig_ctx × rope_scale when the scaling type is yarn and the factor differs from the file's
// (src/llama-context.cpp, llama_init_from_model); linear scaling leaves it, so the slots stay capped.
struct ExtraStretch {
    bool yarn = false;
    double factor = 0;           // --rope-scale F, or 1 / --rope-freq-scale
    std::uint32_t orig_ctx = 0;  // --yarn-orig-ctx (0: the file's training context)
    bool any_rope_flag = false;
};

ExtraStretch extra_stretch(const std::vector<std::string>& extra) {
    ExtraStretch x;
    const auto read = flags::read_extra(flags::llama_server(), extra);
    const auto* fl = std::get_if<std::vector<flags::ExtraFlag>>(&read);
    if (!fl) return x;
    for (const auto& f : *fl) {
        if (f.name.rfind("--rope-", 0) != 0 && f.name.rfind("--yarn-", 0) != 0) continue;
        x.any_rope_flag = true;
        const std::string& v = f.values.empty() ? std::string() : f.values.front();
        double d = 0;
        const bool number = std::from_chars(v.data(), v.data() + v.size(), d).ec == std::errc();
        if (f.name == "--rope-scaling")
            x.yarn = v == "yarn";
        else if (f.name == "--rope-scale" && number && d > 0)
            x.factor = d;
        else if (f.name == "--rope-freq-scale" && number && d > 0)
            x.factor = 1.0 / d;
        else if (f.name == "--yarn-orig-ctx" && number && d >= 1 && d <= 16777216.0)
            x.orig_ctx = static_cast<std::uint32_t>(d);
    }
    return x;
}

}  // namespace

std::optional<std::uint32_t> LlamaArgs::slot_ctx_limit() const {
    if (!file) return std::nullopt;
    const std::uint32_t train = plan::shape_of(*file).n_ctx_train;
    if (train == 0) return std::nullopt;  // the engine then takes -c as it is
    if (ctx_extension == CtxExtension::yarn) return std::max(train, slot_ctx());
    const auto x = extra_stretch(extra);
    if (x.yarn && x.factor > 1.0) {
        const double stretched = static_cast<double>(x.orig_ctx ? x.orig_ctx : train) * x.factor;
        return static_cast<std::uint32_t>(std::min(stretched, 16777216.0));
    }
    return train;
}

std::vector<std::string> LlamaArgs::yarn_flags() const {
    if (ctx_extension != CtxExtension::yarn || !file) return {};
    const std::uint32_t train = plan::shape_of(*file).n_ctx_train;
    if (train == 0 || slot_ctx() <= train) return {};
    // The factor in ten-thousandths, rounded up with a token to spare: the engine computes the stretched
    // context in float (orig / (1 / factor)) and truncates it.
    const auto ten_thousandths = (std::uint64_t{slot_ctx() + 1} * 10000 + train - 1) / train;
    return {"--rope-scaling",  "yarn",
            "--rope-scale",    fmt::format("{}.{:04}", ten_thousandths / 10000, ten_thousandths % 10000),
            "--yarn-orig-ctx", std::to_string(train)};
}

namespace {
// A file a model entry names beside its model (a projector, an adapter, a draft): a relative path is in the
// model file's folder.
std::filesystem::path beside_model(const config::ModelConfig& model, const std::filesystem::path& p) {
    if (p.empty() || p.is_absolute()) return p;
    return (model.path.parent_path() / p).lexically_normal();
}
}  // namespace

std::filesystem::path mmproj_path(const config::ModelConfig& model) {
    return beside_model(model, llama_args(model).mmproj);
}

std::vector<std::filesystem::path> lora_paths(const config::ModelConfig& model) {
    std::vector<std::filesystem::path> out;
    for (const auto& l : llama_args(model).lora) out.push_back(beside_model(model, l.path));
    return out;
}

std::filesystem::path draft_path(const config::ModelConfig& model) {
    const auto& d = llama_args(model).draft;
    return d ? beside_model(model, d->path) : std::filesystem::path{};
}

std::optional<plan::DraftModel> draft_model(const config::ModelConfig& model) {
    const auto& a = llama_args(model);
    if (!a.draft) return std::nullopt;
    plan::DraftModel d;
    d.path = draft_path(model).string();
    d.model = a.draft_file
                  ? a.draft_file
                  : std::make_shared<const gguf::Model>(gguf::for_planning(gguf::read_model(d.path)));
    d.n_max = a.draft->max;
    return d;
}

std::vector<plan::LoraPair> lora_pairs(const config::ModelConfig& model) {
    if (const auto& checked = llama_args(model).lora_pairs) return *checked;
    std::vector<plan::LoraPair> out;
    if (llama_args(model).lora.empty()) return out;
    const auto base = planned_file(model);
    for (const auto& file : lora_paths(model)) {
        try {
            auto adapter = plan::read_lora(gguf::read_model(file), *base);
            out.insert(out.end(), adapter.pairs.begin(), adapter.pairs.end());
        } catch (const std::exception& e) {
            throw std::runtime_error(file.string() + ": " + e.what());
        }
    }
    return out;
}

std::optional<plan::ProjectorPlan> projector_plan(const config::ModelConfig& model) {
    return llama_args(model).projector;
}

std::shared_ptr<const gguf::Model> planned_file(const config::ModelConfig& model) {
    if (auto f = llama_args(model).file) return f;
    return std::make_shared<const gguf::Model>(gguf::for_planning(gguf::read_model(model.path)));
}

std::uint32_t LlamaServerKind::slots(const config::ModelConfig& model) const {
    return std::max<std::uint32_t>(1,
                                   model.concurrency != 0 ? model.concurrency : llama_args(model).parallel);
}

config::Walker::Keys LlamaServerKind::keys(config::Walker& w, config::KindSettings& into) const {
    auto& a = dynamic_cast<LlamaArgs&>(into);
    return {
        {"args", [&w, &a](auto&, auto& node, auto& path) {
             w.walk(
                 node, path,
                 {
                     {"ctx",
                      [&](auto&, auto& v, auto& k) {
                          if (v.IsScalar() && config::ascii_lower(v.Scalar()) == "auto") {
                              a.ctx_auto = true;
                          } else if (auto x = w.integer(v, k, 16, 1 << 24)) {
                              a.ctx = static_cast<std::uint32_t>(*x);
                              a.ctx_auto = false;
                          }
                      }},
                     {"ctx_extension",
                      [&](auto&, auto& v, auto& k) {
                          if (auto x = w.choice<CtxExtension>(
                                  v, k, {{"none", CtxExtension::none}, {"yarn", CtxExtension::yarn}}))
                              a.ctx_extension = *x;
                      }},
                     {"parallel", w.integer_into(a.parallel, 1, 256)},
                     {"n_gpu_layers",
                      [&](auto&, auto& v, auto& k) {
                          if (v.IsScalar() && config::ascii_lower(v.Scalar()) == "all") {
                              a.n_gpu_layers = kAllLayers;
                          } else if (v.IsScalar() && config::ascii_lower(v.Scalar()) == "auto") {
                              a.n_gpu_layers.reset();
                          } else if (auto x = w.integer(v, k, 0, 100000)) {
                              a.n_gpu_layers = static_cast<int>(*x);
                          }
                      }},
                     {"flash_attn",
                      [&](auto&, auto& v, auto& k) {
                          if (auto x = w.choice<FlashAttn>(v, k,
                                                           {{"on", FlashAttn::on},
                                                            {"true", FlashAttn::on},
                                                            {"off", FlashAttn::off},
                                                            {"false", FlashAttn::off},
                                                            {"auto", FlashAttn::auto_}}))
                              a.flash_attn = *x;
                      }},
                     {"cache_type_k", [&](auto&, auto& v, auto& k) { cache_type(w, v, k, a.cache_type_k); }},
                     {"cache_type_v", [&](auto&, auto& v, auto& k) { cache_type(w, v, k, a.cache_type_v); }},
                     {"ubatch", w.integer_into(a.ubatch, 1, 1 << 16)},
                     {"batch", w.integer_into(a.batch, 1, 1 << 20)},
                     {"threads", w.integer_into(a.threads, 1, 1024)},
                     {"cache_ram",
                      [&](auto&, auto& v, auto& k) {
                          if (auto x = w.size(v, k)) a.cache_ram = *x;
                      }},
                     {"mmproj",
                      [&](auto&, auto& v, auto& k) {
                          if (auto x = w.str(v, k)) a.mmproj = w.resolve({}, *x);
                      }},
                     {"lora",
                      [&](auto&, auto& v, auto& k) {
                          if (!v.IsSequence()) {
                              w.error(v, k, "a list of adapters: a path, or {path: …, scale: …}");
                              return;
                          }
                          a.lora.clear();
                          for (std::size_t i = 0; i < v.size(); ++i) {
                              const auto item = v[i];
                              const std::string at = k + "[" + std::to_string(i) + "]";
                              LlamaArgs::Lora l;
                              if (item.IsScalar()) {
                                  if (auto x = w.str(item, at)) l.path = w.resolve({}, *x);
                              } else if (item.IsMap()) {
                                  std::string file;
                                  double scale = 1.0;
                                  w.walk(item, at,
                                         {{"path",
                                           [&](auto&, auto& pv, auto& pk) {
                                               if (auto x = w.str(pv, pk)) file = *x;
                                           }},
                                          {"scale", [&](auto&, auto& sv, auto& sk) {
                                               if (auto x = w.number(sv, sk, -100.0, 100.0)) scale = *x;
                                           }}});
                                  if (file.empty()) {
                                      w.error(item, at, "an adapter needs its path");
                                      continue;
                                  }
                                  l.path = w.resolve({}, file);
                                  l.scale = static_cast<float>(scale);
                              } else {
                                  w.error(item, at, "a path, or {path: …, scale: …}");
                                  continue;
                              }
                              // llama-server splits --lora at ',' and --lora-scaled also at ':'.
                              const auto text = l.path.string();
                              if (text.find(',') != std::string::npos ||
                                  (l.scale != 1.0f && text.find(':') != std::string::npos))
                                  w.error(item, at,
                                          "llama-server's --lora lists split this path (it has a ','" +
                                              std::string(l.scale != 1.0f ? " or ':'" : "") +
                                              "): rename the file");
                              a.lora.push_back(std::move(l));
                          }
                      }},
                     {"draft",
                      [&](auto&, auto& v, auto& k) {
                          LlamaArgs::Draft d;
                          std::string file;
                          if (v.IsScalar()) {
                              if (auto x = w.str(v, k)) file = *x;
                          } else if (v.IsMap()) {
                              w.walk(v, k,
                                     {{"model",
                                       [&](auto&, auto& mv, auto& mk) {
                                           if (auto x = w.str(mv, mk)) file = *x;
                                       }},
                                      {"max", w.integer_into(d.max, 1, 64)}});
                          } else {
                              w.error(v, k, "a draft model's path, or {model: …, max: …}");
                              return;
                          }
                          if (file.empty()) {
                              w.error(v, k, "a draft needs its model's path");
                              return;
                          }
                          d.path = w.resolve({}, file);
                          a.draft = std::move(d);
                      }},
                     {"extra",
                      [&](auto&, auto& v, auto& k) {
                          auto xs = w.str_list(v, k);
                          if (!xs) return;
                          ExtraPlanFlags flags;
                          if (auto refused = read_extra_plan_flags(*xs, flags)) {
                              w.error(v, k, *refused);
                              return;
                          }
                          a.extra = std::move(*xs);
                      }},
                 });
         }}};
}

namespace {

// The cache-type combinations the pinned llama.cpp refuses at context creation for this model
// (src/llama-context.cpp, llama_init_from_model): said here, at config time, with the reason, instead of an
// engine that exits 1 at its first start.
// A slot context above what the engine gives this model: llama-server would cap each slot at the training
// context (tools/server n_ctx_slot()) while loch booked the KV for all of it — refused, with the figures and
// both ways out.
void check_context_against_model(config::Walker& w, const YAML::Node& entry, const std::string& path,
                                 const LlamaArgs& a) {
    const auto limit = a.slot_ctx_limit();
    if (!limit || a.slot_ctx() <= *limit) return;
    const bool stretched = *limit != plan::shape_of(*a.file).n_ctx_train;
    w.error(entry, path + ".args.ctx",
            fmt::format("ctx {} gives each of its {} slot(s) {} tokens, above the {} tokens the engine gives "
                        "this model ({}): llama-server would cap every slot at {} while loch booked memory "
                        "for {}. Set args.ctx to at most {}, or stretch the context with YaRN RoPE scaling "
                        "(args.ctx_extension: yarn; answers may degrade beyond the training context)",
                        a.ctx, a.parallel, a.slot_ctx(), *limit,
                        stretched ? "its training context stretched by args.extra's YaRN flags"
                                  : "its training context, the file's context_length",
                        *limit, a.slot_ctx(), std::uint64_t{*limit} * a.parallel));
}

void check_cache_types_against_model(config::Walker& w, const YAML::Node& entry, const std::string& path,
                                     const config::ModelConfig& m) {
    const auto& a = llama_args(m);
    std::optional<plan::ModelShape> shape;
    try {
        shape = plan::shape_of(*planned_file(m));
    } catch (const std::exception&) {
        return;  // not a model llama.cpp reads either: the engine's start says why
    }
    const std::string k = a.cache_type_k.value_or("f16"), v = a.cache_type_v.value_or("f16");
    const auto quantized = [](const std::string& t) { return t != "f32" && t != "f16" && t != "bf16"; };
    if (shape->mla && k != v) {
        w.error(entry, path + ".args",
                "this model uses latent attention (MLA, " + shape->arch +
                    "): llama.cpp refuses different K and V cache types (cache_type_k " + k +
                    ", cache_type_v " + v + "); set both to the same type");
        return;
    }
    // (With K and V alike, a quantized MLA cache without flash attention is the quantized-V case, said
    // above.)
    if (a.flash_attn == FlashAttn::off) return;
    for (const auto& [which, type] : {std::pair{"cache_type_k", k}, std::pair{"cache_type_v", v}}) {
        const auto t = gguf::type_from_name(type);
        if (!t || !quantized(type)) continue;
        const std::uint32_t block = gguf::traits(*t).block_size;
        const std::uint32_t head = std::string(which) == "cache_type_k"
                                       ? shape->head_k
                                       : (shape->head_v ? shape->head_v : shape->head_k);
        if (head % block != 0) {
            w.error(
                entry, path + ".args." + which,
                fmt::format("{} has blocks of {} values, which do not divide this model's head size {}: "
                            "llama.cpp refuses it with flash attention (use f16, or flash_attn off for K)",
                            type, block, head));
            return;
        }
    }
}

// args.mmproj: a projector loch can plan, as wide as the language model (mtmd refuses a mismatch at load);
// its plan is kept in the settings.
void check_projector(config::Walker& w, const YAML::Node& entry, const std::string& path,
                     config::ModelConfig& m) {
    const auto file = mmproj_path(m);
    if (file.empty()) return;
    const std::string key = path + ".args.mmproj";
    if (!beside_model_file(w, entry, key, file, "mmproj")) return;
    try {
        const auto p = plan::plan_projector(gguf::read_model(file));
        const auto text = planned_file(m)->arch_uint("embedding_length");
        if (text && *text != p.text_embd)
            w.error(
                entry, key,
                fmt::format("{} projects images to {} wide embeddings, but the model is {} wide: it belongs "
                            "to another model (llama-server would refuse to load it)",
                            file.string(), p.text_embd, *text));
        auto with_plan = std::make_unique<LlamaArgs>(llama_args(m));
        with_plan->projector = p;
        m.settings = std::move(with_plan);
    } catch (const std::exception& e) {
        w.error(entry, key, file.string() + ": " + e.what());
    }
}

// args.lora: each adapter as llama.cpp's loader checks it against the model (plan/lora.hpp), its pairs kept
// in the settings for the planner.
void check_lora(config::Walker& w, const YAML::Node& entry, const std::string& path, config::ModelConfig& m) {
    if (llama_args(m).lora.empty()) return;
    std::shared_ptr<const gguf::Model> base;
    try {
        base = planned_file(m);
    } catch (const std::exception&) {
        return;  // the model's own check says why
    }
    auto pairs = std::make_shared<std::vector<plan::LoraPair>>();
    const auto files = lora_paths(m);
    bool ok = true;
    for (std::size_t i = 0; i < files.size(); ++i) {
        const std::string key = path + ".args.lora[" + std::to_string(i) + "]";
        if (!beside_model_file(w, entry, key, files[i], "adapter")) {
            ok = false;
            continue;
        }
        try {
            auto adapter = plan::read_lora(gguf::read_model(files[i]), *base);
            pairs->insert(pairs->end(), adapter.pairs.begin(), adapter.pairs.end());
        } catch (const std::exception& e) {
            w.error(entry, key,
                    files[i].string() + ": " + e.what() + " (llama-server would refuse to load it)");
            ok = false;
        }
    }
    if (!ok) return;
    auto with_pairs = std::make_unique<LlamaArgs>(llama_args(m));
    with_pairs->lora_pairs = std::move(pairs);
    m.settings = std::move(with_pairs);
}

// args.draft: what the engine would refuse (plan/draft.hpp: another speculative type, another vocabulary)
// refused here with its reason; the draft's header kept for the planner.
void check_draft(config::Walker& w, const YAML::Node& entry, const std::string& path,
                 config::ModelConfig& m) {
    if (!llama_args(m).draft) return;
    const std::string key = path + ".args.draft";
    const auto file = draft_path(m);
    if (!beside_model_file(w, entry, key, file, "draft")) return;
    try {
        auto with_draft = std::make_unique<LlamaArgs>(llama_args(m));
        with_draft->draft_file =
            plan::read_draft(file.string(), gguf::read_model(m.path), llama_args(m).draft->max).model;
        m.settings = std::move(with_draft);
    } catch (const std::exception& e) {
        w.error(entry, key, file.string() + ": " + e.what());
    }
}

}  // namespace

void LlamaServerKind::check(config::Walker& w, const YAML::Node& entry, const std::string& path,
                            config::ModelConfig& m, bool check_files) const {
    if (llama_args(m).ctx_auto) {  // before the file is read: 4096 per slot (the file's figure below)
        auto fallback = std::make_unique<LlamaArgs>(llama_args(m));
        fallback->ctx = 4096 * fallback->parallel;
        m.settings = std::move(fallback);
    }
    const LlamaArgs a = llama_args(m);  // a copy: m.settings is replaced below (the file kept)
    if (a.ctx_extension != CtxExtension::none && extra_stretch(a.extra).any_rope_flag)
        w.error(entry, path + ".args.ctx_extension",
                "args.extra already has RoPE/YaRN flags: loch plans the stretch from ctx_extension alone, so "
                "set one or the other");
    if (a.ctx / a.parallel < 16) {
        w.error(entry, path + ".args",
                "ctx " + std::to_string(a.ctx) + " over parallel " + std::to_string(a.parallel) + " leaves " +
                    std::to_string(a.ctx / a.parallel) + " tokens per slot");
    }
    const auto quantized = [](const std::optional<std::string>& t) {
        return t && *t != "f32" && *t != "f16" && *t != "bf16";
    };
    if (a.flash_attn == FlashAttn::off && quantized(a.cache_type_v)) {
        w.error(entry, path + ".args.cache_type_v",
                "a quantized V cache (" + *a.cache_type_v + ") needs flash_attn on or auto");
    }
    if (!check_files || m.path.empty()) return;
    const YAML::Node at = entry["path"];
    const std::string key = path + ".path";
    std::error_code ec;
    if (!std::filesystem::is_regular_file(m.path, ec)) {
        w.error(at, key, m.path.string() + " is not a regular file");
        return;
    }
    std::ifstream in(m.path, std::ios::binary);
    char magic[4] = {};
    if (!in || !in.read(magic, 4)) {
        w.error(at, key, "cannot read " + m.path.string() + " (permissions?) or it is shorter than 4 bytes");
        return;
    }
    if (std::string_view(magic, 4) != "GGUF") {
        w.error(at, key,
                m.path.string() + " is not a GGUF file (llama-server needs one; it starts with other bytes)");
        return;
    }
    try {  // read once, kept for the planner (a file llama.cpp cannot read either: its start says why)
        auto with_file = std::make_unique<LlamaArgs>(a);
        with_file->file = std::make_shared<const gguf::Model>(gguf::for_planning(gguf::read_model(m.path)));
        if (with_file->ctx_auto) {
            const std::uint32_t train = plan::shape_of(*with_file->file).n_ctx_train;
            if (train > 0) with_file->ctx = std::min(train, LlamaArgs::kAutoSlotCtx) * with_file->parallel;
        }
        m.settings = std::move(with_file);
    } catch (const std::exception&) {
    }
    check_context_against_model(w, entry, path, llama_args(m));
    check_cache_types_against_model(w, entry, path, m);
    check_projector(w, entry, path, m);
    check_lora(w, entry, path, m);
    check_draft(w, entry, path, m);
}

nlohmann::json LlamaServerKind::describe_file(const config::ModelConfig& m) const {
    nlohmann::json d = Kind::describe_file(m);
    d["format"] = "gguf";
    try {
        const auto file = planned_file(m);  // (the header the check kept: the file is not read again)
        const gguf::Model& model = *file;
        const auto s = gguf::summarize(model);
        d["architecture"] = s.architecture;
        if (s.parameter_count) d["parameter_count"] = s.parameter_count;
        if (!s.file_type.empty()) d["quantization"] = s.file_type;
        if (s.context_length) d["context_length"] = *s.context_length;
        if (s.embedding_length) d["embedding_length"] = *s.embedding_length;
        bool embedding = model.arch_uint("pooling_type").value_or(0) > 0 ||
                         s.architecture.find("bert") != std::string::npos;
        for (const auto& x : llama_args(m).extra)
            embedding = embedding || x == "--embedding" || x == "--embeddings" || x.starts_with("--pooling");
        d["embedding"] = embedding;
    } catch (const std::exception&) {
        // Not readable now: the size alone (the start will say what is wrong).
    }
    return d;
}

}  // namespace loch::engines

namespace loch::engines {

std::optional<Refusal> LlamaServerKind::explain_error(const config::ModelConfig& model,
                                                      std::string_view route, unsigned status,
                                                      std::string_view body) const {
    if (status < 400) return std::nullopt;
    if (body.find("Pooling type 'none' is not OAI compatible") != std::string_view::npos) {
        Refusal r;
        r.message = "model '" + model.name +
                    "' has no pooling type (its file names none), so it cannot answer " + std::string(route) +
                    ": in loch.yaml, add `--pooling mean` (or cls, last) to its args.extra (models." +
                    model.name + ")";
        r.details = {{"engine_status", status},
                     {"fix", "args.extra: [\"--embeddings\", \"--pooling\", \"mean\"]"}};
        return r;
    }
    // llama-server names the flag a disabled feature needs: "Start it with `--embeddings`".
    constexpr std::string_view marker = "Start it with `";
    const auto at = body.find(marker);
    if (at == std::string_view::npos) return std::nullopt;
    const auto from = at + marker.size();
    const auto to = body.find('`', from);
    if (to == std::string_view::npos || to - from > 40) return std::nullopt;
    const std::string flag(body.substr(from, to - from));
    if (!flag.starts_with("--")) return std::nullopt;
    Refusal r;
    r.kind = Refusal::Kind::invalid_request;
    r.message = "model '" + model.name + "' was not started for " + std::string(route) +
                ": in loch.yaml, add `args: {extra: [\"" + flag + "\"]}` to its entry (models." + model.name +
                ") — llama-server needs " + flag + " for it";
    r.details = {{"engine_status", status}, {"needs_flag", flag}, {"fix", "args.extra: [\"" + flag + "\"]"}};
    return r;
}

}  // namespace loch::engines
