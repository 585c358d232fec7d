// broker/footprint — what a model needs on each allowed device before it is started: the figure the
// ledger reserves. The engine kind estimates it (engines/kind.hpp: formula, or its better estimate — for
// llama-server the planner and the engine's dry run by THE reservation rule, docs/plan.md); the broker adds
// the peak measured on earlier runs (Broker::need_on). Need::why lists every candidate.
//
// A seam for the broker's unit tests: the broker asks a FootprintSource, never a kind directly.
#pragma once

#include <filesystem>
#include <string>
#include <vector>

#include <boost/asio/any_io_executor.hpp>
#include <boost/asio/awaitable.hpp>

#include "config/config.hpp"
#include "core/footprint.hpp"
#include "engines/kind.hpp"

namespace loch::broker {

using loch::Candidate;
using loch::Footprint;
using loch::largest_of;

class FootprintSource {
  public:
    virtual ~FootprintSource() = default;
    virtual boost::asio::awaitable<Footprint> estimate(const config::Config& cfg,
                                                       const config::ModelConfig& model,
                                                       const std::vector<engines::Placement>& devices) = 0;
    // The model split over `where` (where.split()): one Need per device, the main one first; empty when its
    // kind does not split a model. The kind's split_formula.
    virtual std::vector<Need> split(const config::Config& cfg, const config::ModelConfig& model,
                                    const engines::Placement& where) {
        return engines::kind_of(model).split_formula(cfg, model, where);
    }
};

// The model's kind: its estimate (which may run the engine's dry run, cached in `cache_file`).
class KindFootprint : public FootprintSource {
  public:
    KindFootprint(boost::asio::any_io_executor ex, std::filesystem::path cache_file = {})
        : ctx_{std::move(ex), std::move(cache_file)} {}
    boost::asio::awaitable<Footprint> estimate(const config::Config& cfg, const config::ModelConfig& model,
                                               const std::vector<engines::Placement>& devices) override {
        co_return co_await engines::kind_of(model).estimate(ctx_, cfg, model, devices);
    }

  private:
    engines::EstimateContext ctx_;
};

// A device id as the engines' runtimes number it, when no probe said (configured ids such as "cuda0",
// budget-only setups, tests): "cpu" → the CPU; "nvidia:N" / "cudaN" → CUDA N; "rocmN" → HIP N; "vulkanN" →
// Vulkan N; anything else (e.g. "amd:card1") → its backend with the ordinal left to the engine's default.
engines::Placement placement_without_probe(const std::string& device);

}  // namespace loch::broker
