// broker/footprint — what a model needs on each allowed device before it is started: the figure the
// ledger reserves.
//
// THE reservation rule (never under the truth): per device, the largest of what loch knows to be true for
// this model and these settings, each with its source —
//   1. loch's planner (plan/plan.hpp: weights, repacked CPU weights, KV, compute, output, per-process
//      overhead; Source::formula),
//   2. the engine's own dry run (`llama-fit-params` with the engine's flags; Source::engine_dry_run) plus
//      what a dry run leaves out: on a GPU the per-process overhead, on the CPU the mapped weights, their
//      repacked copy and the process overhead,
//   3. the peak measured on earlier runs (the broker adds it: Broker::need_on),
// plus the device's configured margin. Need::why lists every candidate.
//
// The dry run runs as an async child process (engines::Process), never blocking the io_context. Its
// result is cached in <state_dir>/dry-run-cache.json, keyed by the model file (path, size, mtime), the
// exact argv and the engine binary (path, size, mtime), so a restart of loch does not repeat it.
#pragma once

#include <filesystem>
#include <string>
#include <vector>

#include <boost/asio/any_io_executor.hpp>
#include <boost/asio/awaitable.hpp>

#include "broker/admission.hpp"
#include "config/config.hpp"
#include "core/memory.hpp"

namespace loch::broker {

struct Footprint {
    std::vector<Need> needs;  // one per allowed device, preference order
    Source source = Source::formula;
    std::string detail;  // how it was obtained, or why the dry run was not used
};

// The reservation rule's arithmetic for one device (pure; unit-tested): the largest candidate wins and
// names its source; `detail` lists them all.
struct Candidate {
    std::string what;  // "formula", "dry run + overhead", "measured peak"
    MemoryFigure figure;
};
MemoryFigure largest_of(const std::vector<Candidate>& candidates);

class FootprintSource {
  public:
    virtual ~FootprintSource() = default;
    virtual boost::asio::awaitable<Footprint> estimate(const config::Config& cfg,
                                                       const config::ModelConfig& model,
                                                       const std::vector<std::string>& devices) = 0;
};

// Planner and dry run (when `fit_params` exists and the model is a llama-server model), by the rule above.
class EngineDryRunFootprint : public FootprintSource {
  public:
    // `cache_file` empty = no cache on disk.
    EngineDryRunFootprint(boost::asio::any_io_executor ex, std::filesystem::path fit_params,
                          std::filesystem::path cache_file = {})
        : ex_(std::move(ex)), fit_params_(std::move(fit_params)), cache_file_(std::move(cache_file)) {}
    boost::asio::awaitable<Footprint> estimate(const config::Config& cfg, const config::ModelConfig& model,
                                               const std::vector<std::string>& devices) override;

  private:
    boost::asio::awaitable<std::optional<std::string>> dry_run(const std::vector<std::string>& argv,
                                                               std::string* why);
    boost::asio::any_io_executor ex_;
    std::filesystem::path fit_params_;
    std::filesystem::path cache_file_;
};

// Without a dry run: loch's planner for llama-server models (falls back to the file size when the file
// cannot be planned), the file size for other engines; plus the device's configured margin.
Footprint formula_footprint(const config::Config& cfg, const config::ModelConfig& model,
                            const std::vector<std::string>& devices);

// loch device id ("cpu", "cuda0", "nvidia:0") → llama.cpp's --device value and the placement flags.
struct Placement {
    std::vector<std::string> llama_devices;  // "none" for the CPU
    int n_gpu_layers = 0;
};
Placement placement_for(const std::string& device);

}  // namespace loch::broker
