// The llama-server kind's config: the `args:` section of a model entry, and its checks.
#include <algorithm>
#include <fstream>

#include "engines/kinds/llama_server.hpp"

namespace loch::engines {

namespace {

const std::vector<std::string> kCacheTypes = {"f32",  "f16",    "bf16", "q8_0", "q4_0",
                                              "q4_1", "iq4_nl", "q5_0", "q5_1"};
// Flags loch sets itself; in args.extra they would fight with loch's own.
const std::vector<std::string> kReservedFlags = {
    "-m", "--model", "--host", "--port", "-fit", "--fit", "-c", "--ctx-size", "-np", "--parallel", "-ngl",
    "--gpu-layers", "--n-gpu-layers", "--api-key", "--api-key-file",
    // Placement is loch's: which devices, and how a model is split over them (issue 14).
    "-dev", "--device", "-sm", "--split-mode", "-ts", "--tensor-split", "-mg", "--main-gpu"};

void cache_type(config::Walker& w, const YAML::Node& v, const std::string& k,
                std::optional<std::string>& out) {
    const auto s = w.str(v, k);
    if (!s) return;
    const std::string t = config::lower(*s);
    if (std::find(kCacheTypes.begin(), kCacheTypes.end(), t) == kCacheTypes.end()) {
        w.error(v, k,
                "unknown cache type '" + *s + "' (llama-server accepts " + config::quoted_list(kCacheTypes) +
                    ")");
        return;
    }
    out = t;
}

}  // namespace

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
                     {"ctx", w.integer_into(a.ctx, 16, 1 << 24)},
                     {"parallel", w.integer_into(a.parallel, 1, 256)},
                     {"n_gpu_layers",
                      [&](auto&, auto& v, auto& k) {
                          if (v.IsScalar() && config::lower(v.Scalar()) == "all") {
                              a.n_gpu_layers = kAllLayers;
                          } else if (v.IsScalar() && config::lower(v.Scalar()) == "auto") {
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
                     {"extra",
                      [&](auto&, auto& v, auto& k) {
                          auto xs = w.str_list(v, k);
                          if (!xs) return;
                          for (std::size_t i = 0; i < xs->size(); ++i) {
                              const std::string flag = (*xs)[i].substr(0, (*xs)[i].find('='));
                              if (std::find(kReservedFlags.begin(), kReservedFlags.end(), flag) !=
                                  kReservedFlags.end()) {
                                  w.error(v[i], k + "[" + std::to_string(i) + "]",
                                          "'" + flag +
                                              "' is set by loch (use the args keys: ctx, parallel, "
                                              "n_gpu_layers; host/port/model/fit and the devices a "
                                              "model runs on, split or not, are loch's)");
                                  return;
                              }
                          }
                          a.extra = std::move(*xs);
                      }},
                 });
         }}};
}

void LlamaServerKind::check(config::Walker& w, const YAML::Node& entry, const std::string& path,
                            const config::ModelConfig& m, bool check_files) const {
    const auto& a = llama_args(m);
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
    if (std::string_view(magic, 4) != "GGUF")
        w.error(at, key,
                m.path.string() + " is not a GGUF file (llama-server needs one; it starts with other bytes)");
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
