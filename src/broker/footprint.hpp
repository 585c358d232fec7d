// broker/footprint — what a model needs on each allowed device before it is started: the admission figure
// that the ledger reserves until the engine's log reports the real one.
//
// Source order: the engine's own dry run (`llama-fit-params` with the engine's exact flags:
// Source::engine_dry_run), else loch's formula from the file size (Source::formula: weights = file size,
// KV/compute unknown). The dry run runs as an async child process (engines::Process), never blocking the
// io_context, and its answer is cached per model by the broker.
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

class FootprintSource {
  public:
    virtual ~FootprintSource() = default;
    virtual boost::asio::awaitable<Footprint> estimate(const config::Config& cfg,
                                                       const config::ModelConfig& model,
                                                       const std::vector<std::string>& devices) = 0;
};

// The dry run when `fit_params` exists and the model is a llama-server model; the formula otherwise.
class EngineDryRunFootprint : public FootprintSource {
  public:
    EngineDryRunFootprint(boost::asio::any_io_executor ex, std::filesystem::path fit_params)
        : ex_(std::move(ex)), fit_params_(std::move(fit_params)) {}
    boost::asio::awaitable<Footprint> estimate(const config::Config& cfg, const config::ModelConfig& model,
                                               const std::vector<std::string>& devices) override;

  private:
    boost::asio::any_io_executor ex_;
    std::filesystem::path fit_params_;
};

// Formula only: weights = model file size on the device, plus the device's configured margin.
Footprint formula_footprint(const config::Config& cfg, const config::ModelConfig& model,
                            const std::vector<std::string>& devices);

// loch device id ("cpu", "cuda0", "nvidia:0") → llama.cpp's --device value and the placement flags.
struct Placement {
    std::vector<std::string> llama_devices;  // "none" for the CPU
    int n_gpu_layers = 0;
};
Placement placement_for(const std::string& device);

}  // namespace loch::broker
