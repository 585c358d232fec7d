// engines/kinds/command — any OpenAI-compatible server started from an argv template (`command:` in the
// config). Placeholders {host} {port} {model_path} {model_name} {ctx} {parallel} {threads} are replaced
// inside each argument; "{{" / "}}" are literal braces. One grammar serves the config check (at load, with
// the entry's position) and the launch. No shell ever sees the result: each template entry is one argv entry.
//
// Placement reaches the process: only the admitted device is visible to it (CUDA_VISIBLE_DEVICES,
// HIP_VISIBLE_DEVICES, ROCR_VISIBLE_DEVICES; "-1" hides a backend, so an engine placed on the CPU sees no
// GPU). Readiness: GET of its health path → 200, or, with `health_path: none`, its port accepting a
// connection. Footprint: the model's `memory:` (configured, per device or one figure for all), else the
// size of its files (a folder counts every file in it); after start the broker's per-process measurement
// of its process group raises the reservation. The run's secret is in LOCH_ENGINE_API_KEY.
#pragma once

#include <map>
#include <string>
#include <string_view>
#include <vector>

#include "engines/kind.hpp"

namespace loch::engines {

// The names a template may use.
const std::vector<std::string>& command_placeholders();
// Throws std::invalid_argument naming an unknown placeholder or an unbalanced brace. A value is inserted as
// it is: it is never scanned for placeholders itself.
std::string expand_placeholders(std::string_view tmpl, const std::map<std::string, std::string>& values);

// The model entry's `command:` section (docs/config.md).
struct CommandSettings final : config::KindSettings {
    std::vector<std::string> argv;           // the template; required
    std::string health_path = "/health";     // GET → 200 means ready; empty (`none`): the port accepts
    std::map<std::string, std::string> env;  // added to the engine's environment
    std::uint32_t ctx = 4096;                // the {ctx} placeholder
    std::uint32_t parallel = 1;              // the {parallel} placeholder; the slots unless `concurrency`
    std::vector<std::string> routes;         // the API routes it answers; empty: the OpenAI text routes
    // The CPU threads it computes with (the {threads} placeholder): counted against the cores like
    // llama-server's args.threads wherever it runs (docs/broker.md); unset: not counted.
    std::optional<std::uint32_t> threads;
    std::unique_ptr<config::KindSettings> clone() const override {
        return std::make_unique<CommandSettings>(*this);
    }
};
const CommandSettings& command_settings(const config::ModelConfig& model);

std::vector<std::string> command_argv(const config::ModelConfig& model, std::uint16_t port);

class CommandKind final : public Kind {
  public:
    std::string_view name() const override { return "command"; }
    std::unique_ptr<config::KindSettings> initial_settings() const override {
        return std::make_unique<CommandSettings>();
    }
    config::Walker::Keys keys(config::Walker& w, config::KindSettings& into) const override;
    void check(config::Walker& w, const YAML::Node& entry, const std::string& path,
               config::ModelConfig& model, bool check_files) const override;
    std::uint32_t slots(const config::ModelConfig& model) const override;
    EngineSpec launch(const config::Config& cfg, const config::ModelConfig& model, const Placement& where,
                      std::uint16_t port) const override;
    Footprint formula(const config::Config& cfg, const config::ModelConfig& model,
                      const std::vector<Placement>& devices) const override;
    bool serves(const config::ModelConfig& model, std::string_view route) const override;
    std::optional<std::uint32_t> cpu_threads(const config::ModelConfig& model, const Placement& where,
                                             std::uint32_t cores, std::uint32_t layers) const override;
    // Any server: it names the model as it likes (a file path, its own id).
    bool names_model_as_configured() const override { return false; }
};

}  // namespace loch::engines
