// broker/policy — how the broker schedules, behind one seam. `loch_policy()` is the product. The anchors'
// policies exist so that bench/mixed-trace can run them side by side with loch's on the same planner and
// engines (docs/performance.md); `loch serve --bench-policy NAME` injects one, nothing else does:
//   fifo-lock     — llama-swap's default: one model at a time (every model exclusive: the others stop before
//                   one starts), one queue in arrival order with no priorities, served head of line;
//   keepalive-lru — Ollama's: no priorities (one queue in arrival order, no yielding to people), models stay
//                   for their keep_alive and idle ones are evicted when a model does not fit.
// The broker asks the policy these questions and nothing else about it.
#pragma once

#include <memory>
#include <string>
#include <string_view>

namespace loch::broker {

class SchedulingPolicy {
  public:
    virtual ~SchedulingPolicy() = default;
    virtual std::string_view name() const = 0;
    // Priorities count: interactive before batch, batch work yields to people (and is evicted first when
    // idle), a batch waiter ages into an interactive one. Without: everything competes as interactive.
    virtual bool has_priorities() const = 0;
    // Equal work for different models takes turns on a shared device (broker/turns.cpp: the CPU's cores, a
    // device's memory past memory_turn_after), and engines on the CPU compute side by side only while their
    // threads fit in its cores (broker/cpu_threads.cpp).
    virtual bool takes_turns() const = 0;
    // A waiting start's files are read into the page cache meanwhile (broker/read_ahead.cpp).
    virtual bool reads_ahead() const = 0;
    // Every model is exclusive (the others stop before one starts) and the queue is served head of line.
    virtual bool one_model_at_a_time() const = 0;
};

// loch's own: priorities, turns, read-ahead, models side by side where memory allows.
std::shared_ptr<const SchedulingPolicy> loch_policy();
// By name: "loch", "fifo-lock", "keepalive-lru"; null for any other.
std::shared_ptr<const SchedulingPolicy> policy_named(std::string_view name);

}  // namespace loch::broker
