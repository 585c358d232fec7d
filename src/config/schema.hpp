// config/schema — internal to the config module: loch's schema over a parsed YAML document
// (config/loader.cpp), for the entry points that build a Config in other ways (config/discover.cpp: the
// embedded default).
#pragma once

#include <yaml-cpp/yaml.h>

#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "config/config.hpp"

namespace loch::config {

class Schema {
  public:
    Schema(std::string file, fs::path base_dir, const LoadContext& ctx);
    ~Schema();
    Config parse(const YAML::Node& root, Config c);
    // A `defaults:` mapping as the starting point of a model entry of the default kind.
    ModelConfig default_model(const YAML::Node& defaults_node);
    void finish(Config& c);  // the cross-model checks and the engine binary lookup
    // A model found on disk: its kind's check (what the planner needs kept in its settings, its file's
    // facts read) as an entry's would be; the first problem, or empty.
    std::string check_found(ModelConfig& m);
    std::vector<Diagnostic>& diagnostics();

  private:
    struct Impl;
    std::unique_ptr<Impl> impl_;
};

// Throws ConfigError for a YAML syntax error (with its position).
YAML::Node load_yaml(std::string_view text, const std::string& file);

}  // namespace loch::config
