// The embedded default: loch's settings as YAML, and every *.gguf in a models folder as a model (split
// parts and multimodal projectors skipped, with a note).
#include <algorithm>

#include "config/config.hpp"
#include "config/schema.hpp"

namespace loch::config {

std::string_view embedded_default_yaml() {
    return R"(# loch's embedded default: what `loch serve` without --config does.
listen: 127.0.0.1
port: 8080
models_dir: ./models          # every *.gguf here is served; model name = file stem
defaults:
  args:
    ctx: auto                 # each model's training context, at most 32768 tokens
    parallel: 1
    flash_attn: auto
  priority: interactive
  keep_alive: 5m
  startup_timeout: 1h
  watchdog: 2m
models: []                    # filled from models_dir
)";
}

Config default_config(const LoadContext& ctx, const fs::path& models_dir) {
    const std::string label = "<embedded default>";
    const YAML::Node root = load_yaml(embedded_default_yaml(), label);
    Schema loader(label, ctx.cwd, ctx);
    Config c;
    c.source = label;
    if (!models_dir.empty())
        c.models_dir = models_dir.is_relative() ? (ctx.cwd / models_dir).lexically_normal() : models_dir;
    // The embedded text sets models_dir: ./models; an explicit folder wins.
    const fs::path wanted = c.models_dir;
    c = loader.parse(root, std::move(c));
    if (!wanted.empty()) c.models_dir = wanted;

    std::error_code ec;
    if (!fs::is_directory(c.models_dir, ec)) {
        throw ConfigError({Diagnostic{label, 0, 0, "models_dir",
                                      "models folder " + c.models_dir.string() +
                                          " does not exist: create it and put *.gguf files in it, pass "
                                          "--models-dir, or pass --config"}});
    }
    std::vector<fs::path> files;
    for (const auto& e : fs::directory_iterator(c.models_dir, ec)) {
        std::error_code ec2;
        if (e.path().extension() == ".gguf" && e.is_regular_file(ec2)) files.push_back(e.path());
    }
    std::sort(files.begin(), files.end());

    const ModelConfig defaults = loader.default_model(root["defaults"]);
    for (const auto& f : files) {
        std::string stem = f.stem().string();
        if (stem.rfind("mmproj", 0) == 0) {
            c.notes.push_back("skipped " + f.filename().string() + ": a multimodal projector, not a model");
            continue;
        }
        // Split models: name-00001-of-00003.gguf is the model; later parts are loaded by llama-server.
        const auto of = stem.rfind("-of-");
        if (of != std::string::npos && of >= 6 && stem[of - 6] == '-' && stem.size() == of + 9) {
            const std::string part = stem.substr(of - 5, 5);
            if (part != "00001") {
                c.notes.push_back("skipped " + f.filename().string() + ": part " + part +
                                  " of a split model");
                continue;
            }
            stem = stem.substr(0, of - 6);
        }
        ModelConfig m = defaults;
        m.name = sanitize_model_name(stem);
        m.path = f;
        m.file = label;
        if (m.name.empty()) {
            c.notes.push_back("skipped " + f.filename().string() + ": no usable model name in the file name");
            continue;
        }
        if (c.find_model(m.name) != nullptr) {
            c.notes.push_back("skipped " + f.filename().string() + ": its name '" + m.name +
                              "' is taken by another file");
            continue;
        }
        // Checked as a written entry would be; a file its engine could not serve is left out (the others
        // are still served) with the reason.
        if (const auto why = loader.check_found(m); !why.empty()) {
            c.notes.push_back("skipped " + f.filename().string() + ": " + why);
            continue;
        }
        c.models.push_back(std::move(m));
    }
    if (c.models.empty()) {
        std::string skipped;
        for (const auto& n : c.notes) skipped += (skipped.empty() ? "" : "; ") + n;
        throw ConfigError({Diagnostic{
            label, 0, 0, "models_dir",
            (files.empty() ? "no *.gguf files in " + c.models_dir.string()
                           : "no model loch can serve in " + c.models_dir.string() + " (" + skipped + ")") +
                ": put a model there (e.g. `loch-synth` writes one), or pass --config"}});
    }
    loader.finish(c);
    if (!loader.diagnostics().empty()) throw ConfigError(std::move(loader.diagnostics()));
    return c;
}

}  // namespace loch::config
