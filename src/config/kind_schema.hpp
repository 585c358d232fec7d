// config/kind_schema — how an engine kind's own keys in a model entry are loaded, without the config module
// knowing any kind. Each kind (engines/kinds/*) implements a KindSchema; the caller hands the list to the
// loader (LoadContext::kinds, the default kind first). A model entry's `engine:` picks its kind; the kind's
// keys (llama-server: `args`; command: `command`) are walked with the shared Walker, so its errors carry
// file:line like every other; `defaults:` takes every kind's keys, and an entry starts from its kind's
// defaults. A key of another kind in an entry is an error that names the kind it belongs to.
#pragma once

#include <yaml-cpp/yaml.h>
#include <nlohmann/json.hpp>

#include <memory>
#include <stdexcept>
#include <string>
#include <string_view>

#include "config/config.hpp"
#include "config/walker.hpp"

namespace loch::config {

// A kind's settings: the values of its own keys. Each kind derives its own type.
struct KindSettings {
    virtual ~KindSettings() = default;
    virtual std::unique_ptr<KindSettings> clone() const = 0;
};

class KindSchema {
  public:
    virtual ~KindSchema() = default;
    virtual std::string_view name() const = 0;
    // The settings before any key of the file: what `defaults:` starts from.
    virtual std::unique_ptr<KindSettings> initial_settings() const = 0;
    // The keys it adds to a model entry (and to `defaults:`), each parsing into `into` (the same object
    // the kind's settings_as<> will see; `w` records the errors).
    virtual Walker::Keys keys(Walker& w, KindSettings& into) const = 0;
    // After the entry was walked (`entry` its node, `path` "models[2]"): checks across keys, required
    // sections, the model file (when `check_files`). What it reads from files and loch needs while it
    // serves, it keeps in the model's settings (a new copy), so that the request path reads no file.
    // Doing nothing is correct.
    virtual void check(Walker& w, const YAML::Node& entry, const std::string& path, ModelConfig& model,
                       bool check_files) const;
    // {"bytes", and where known "format", "architecture", "parameter_count", "quantization",
    // "context_length", "embedding"}: what the model's file says about itself, for clients that list
    // models. Read once at load (ModelConfig::file_facts), never on loch's loop. Default: the files' size.
    virtual nlohmann::json describe_file(const ModelConfig& model) const;
    // The program it runs, found in engine_dir, then on PATH (Config::programs); empty: none.
    virtual std::string program() const { return {}; }
    // How to get that program when it is missing, for the error that says so ("bash scripts/setup.sh
    // --images builds it"); empty: nothing to add.
    virtual std::string how_to_get() const { return {}; }
    // Whether a model entry of this kind must name a `path`.
    virtual bool needs_path() const { return false; }
};

// The settings of `m` as its kind's type `T`. A ModelConfig built by hand without settings reads T's
// defaults; settings of another type are a bug (std::logic_error).
template <class T>
const T& settings_as(const ModelConfig& m) {
    static const T defaults{};
    if (!m.settings) return defaults;
    const auto* s = dynamic_cast<const T*>(m.settings.get());
    if (!s) throw std::logic_error("model '" + m.name + "' has the settings of another engine kind");
    return *s;
}

}  // namespace loch::config
