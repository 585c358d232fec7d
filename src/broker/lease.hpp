// broker/lease — one request's hold on one slot of a ready engine, as the broker granted it: where the
// engine listens (with its secret), what it said once ready, the model's kind and config, and how the request
// got there (queue wait, admission's decision, priority). Releasing it (release(), or the destructor) hands
// the slot back on the broker's thread.
#pragma once

#include <chrono>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>

#include "config/config.hpp"
#include "engines/engine_client.hpp"
#include "engines/kind.hpp"
#include "engines/run.hpp"

namespace loch::broker {

using engines::EngineAddress;

class Broker;

// One request's hold on one slot of a ready engine. Releasing (destructor) frees the slot and lets the
// next waiter in.
class Lease {
  public:
    Lease() = default;
    Lease(Lease&& o) noexcept { *this = std::move(o); }
    Lease& operator=(Lease&& o) noexcept;
    ~Lease() { release_later(); }

    const std::string& model() const { return model_; }
    const std::string& host() const { return address_.host; }
    std::uint16_t port() const { return address_.port; }
    const EngineAddress& address() const { return address_; }                  // with the engine's secret
    std::optional<std::uint64_t> slot_ctx() const { return facts_.slot_ctx; }  // tokens per slot
    const engines::ReadyFacts& facts() const { return facts_; }  // what the engine said after ready
    const engines::Kind& kind() const { return *kind_; }         // valid() only
    const config::ModelConfig* config() const { return model_cfg_; }
    std::optional<std::chrono::seconds> watchdog() const { return watchdog_; }
    // For the request log: how long it queued, and what admission decided ("ready" when granted at once).
    std::chrono::steady_clock::duration queue_wait() const { return queue_wait_; }
    const std::string& decision() const { return decision_; }
    const std::string& priority() const { return priority_; }
    const std::shared_ptr<engines::EngineRun>& engine() const { return engine_; }
    bool valid() const { return broker_ != nullptr; }
    // Hands the slot back now: for a relay once its engine has answered whole (not from a destructor; the
    // broker may start what waited for the slot). A lease dropped without it is released on the broker's
    // next pass instead (release_later), so the broker never runs inside a destructor.
    void release();
    void release_later();

  private:
    friend class Broker;
    Broker* broker_ = nullptr;
    std::weak_ptr<bool> alive_;
    std::chrono::steady_clock::time_point granted_at_;
    std::string model_;
    EngineAddress address_;
    engines::ReadyFacts facts_;
    const engines::Kind* kind_ = nullptr;
    const config::ModelConfig* model_cfg_ = nullptr;
    std::optional<std::chrono::seconds> watchdog_;
    std::shared_ptr<engines::EngineRun> engine_;
    std::chrono::steady_clock::duration queue_wait_{};
    std::string decision_, priority_;
    bool interactive_ = true;
    std::string transient_;  // the ledger holder of the request's own memory, if it has any
};

}  // namespace loch::broker
