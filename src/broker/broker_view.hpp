// broker/broker_view — what the broker knows, asked without changing what it serves: the views /loch/status,
// /v1/models, the dashboard, `loch ps`, /metrics and the load balancer's agent show, and the questions the
// HTTP layer asks about a request before it is admitted (is it refused from the config alone, what memory
// of its own does it need, does batch work yield here). A facet of the Broker: its clients see only this.
#pragma once

#include <chrono>
#include <cstddef>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include <boost/asio/awaitable.hpp>
#include <nlohmann/json.hpp>

#include "broker/outlook.hpp"
#include "config/config.hpp"
#include "engines/exit.hpp"
#include "engines/kind.hpp"
#include "engines/run.hpp"

namespace loch::broker {

class Broker;

class BrokerView {
  public:
    const config::Config& config() const;
    // /v1/models.
    boost::asio::awaitable<nlohmann::json> models();
    // Everything /loch/status, the dashboard, `loch ps` and /metrics show: devices (the ledger), engines,
    // the queue with each waiter's reason, recent events (admissions, evictions, loads, exits).
    boost::asio::awaitable<nlohmann::json> status();
    // The last hour for the dashboard's plots: memory by holder per device, the queue, evictions and
    // refusals (broker/history.hpp).
    boost::asio::awaitable<nlohmann::json> history();
    // The configured models whose engine kind answers `route` ("/sdapi/v1/txt2img": the image models).
    std::vector<const config::ModelConfig*> models_serving(std::string_view route) const;
    // How `model` would be served here now, for a load balancer (HAProxy's agent): resident, fits now,
    // fits after evicting, only later, never; at once, without waiting for anything.
    Outlook outlook(const std::string& model);
    // Dry run of admission for `model` now: would it be admitted, what would be evicted, or why refused.
    boost::asio::awaitable<nlohmann::json> plan(std::string model);
    boost::asio::awaitable<std::optional<std::vector<std::string>>> log_tail(std::string model,
                                                                             std::size_t n);
    // For a client shown progress while it waits: {model, state, reason, loading {elapsed_s, expected_s}}.
    nlohmann::json progress(const std::string& model);
    // After an upstream failure: how the engine ended, if it did within `wait` (polls; never hangs).
    boost::asio::awaitable<std::optional<engines::ExitReport>> exit_report(
        std::shared_ptr<engines::EngineRun> e, std::chrono::milliseconds wait);
    // The model's kind refuses a request from its config alone (engines/kind.hpp), before anything starts.
    std::optional<engines::Refusal> check_before_start(const std::string& model,
                                                       const engines::RequestView& r);
    // What `request` needs of its own beside the engine (asks the model's kind); nullopt for most requests
    // and for unknown models.
    std::optional<engines::RequestCost> request_cost(const std::string& model,
                                                     const engines::RequestView& request);
    // Batch work yields to people: true while an interactive request runs or waits on the model, runs on
    // another engine on the CPU, or waits for room on a device the model runs on (or would start on)
    // (broker/yielding.cpp). Then no batch-priority request for it is granted (it waits, and an engine
    // idle between batch items is evicted like any idle one), and the Batch API's runner preempts the
    // items it has running there where the engine can stop them (docs/batches.md).
    bool yields_to_interactive(const std::string& model) const;

  private:
    friend class Broker;
    explicit BrokerView(Broker& broker) : broker_(broker) {}
    Broker& broker_;
};

}  // namespace loch::broker
