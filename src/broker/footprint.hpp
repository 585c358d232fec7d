// broker/footprint — what a model needs on each allowed device before it is started: the figure the
// ledger reserves. The engine kind estimates it (engines/kind.hpp: formula, or its better estimate — for
// llama-server the planner and the engine's dry run by THE reservation rule, docs/plan.md); the broker adds
// the peak measured on earlier runs (Broker::need_on). Need::why lists every candidate.
//
// A seam for the broker's unit tests: the broker asks a FootprintSource, never a kind directly.
#pragma once

#include <filesystem>
#include <optional>
#include <string>
#include <vector>

#include <boost/asio/any_io_executor.hpp>
#include <boost/asio/awaitable.hpp>
#include <boost/asio/co_spawn.hpp>
#include <boost/asio/thread_pool.hpp>
#include <boost/asio/use_awaitable.hpp>

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

// The model's kind: its estimate (which may run the engine's dry run, cached in `cache_file`). The estimate
// reads the model's file, plans it and reads and writes the dry-run cache: it runs on a worker thread of its
// own (its dry runs wait there too), never on loch's loop; the awaiting coroutine resumes on the loop. The
// config entries it reads are immutable while it runs (the broker keeps every entry a request may still see).
class KindFootprint : public FootprintSource {
  public:
    // `runs_on`: where the estimates run instead of the worker thread — a unit test's own loop, whose models'
    // kinds estimate without blocking, so that the test drives every step.
    explicit KindFootprint(std::filesystem::path cache_file = {},
                           std::optional<boost::asio::any_io_executor> runs_on = std::nullopt)
        : runs_on_(runs_on ? *runs_on : work_.get_executor()), ctx_{runs_on_, std::move(cache_file)} {}
    boost::asio::awaitable<Footprint> estimate(const config::Config& cfg, const config::ModelConfig& model,
                                               const std::vector<engines::Placement>& devices) override {
        co_return co_await boost::asio::co_spawn(runs_on_,
                                                 engines::kind_of(model).estimate(ctx_, cfg, model, devices),
                                                 boost::asio::use_awaitable);
    }
    // The worker stops before ctx_ goes (an estimate still running is abandoned; its dry run is killed).
    ~KindFootprint() override {
        work_.stop();
        work_.join();
    }
    KindFootprint(const KindFootprint&) = delete;
    KindFootprint& operator=(const KindFootprint&) = delete;

  private:
    boost::asio::thread_pool work_{1};  // before runs_on_ and ctx_, which hold its executor
    boost::asio::any_io_executor runs_on_;
    engines::EstimateContext ctx_;
};

// A device id as the engines' runtimes number it, when no probe said (configured ids such as "cuda0",
// budget-only setups, tests): "cpu" → the CPU; "nvidia:N" / "cudaN" → CUDA N; "rocmN" → HIP N; "vulkanN" →
// Vulkan N; anything else (e.g. "amd:card1") → its backend with the ordinal left to the engine's default.
engines::Placement placement_without_probe(const std::string& device);

}  // namespace loch::broker
