// broker/cpu_threads — engines on the CPU compute side by side only while their threads fit in its cores.
//
// ggml's worker threads spin at every barrier: two engines of 2 threads each on 2 cores do not each run at
// half speed but at a ninth (docs/performance.md, "Threads on a shared CPU"), and both the person and the
// batch lose. So a request for a CPU engine that is not computing waits while other CPU engines compute
// with threads that, with its own, exceed the cores; the queue serves it the moment they finish, in its
// order. A person's request does not wait for batch work, though: engines computing only batch requests
// are not counted against it — the overlap lasts until their current item ends, since batch work yields to
// people (their next item waits) — so "batch yields to people" holds on a shared CPU too. An engine
// already computing takes more requests into its own threads (its slots) — unless another model's request
// waits for its turn (broker/turns.cpp). Threads are the kind's (its
// `threads` setting, else the engine's default); an engine whose kind cannot say (a command engine without
// `command.threads`) is not counted. Only the product's policy does this (the anchors' are what they are).
// Member functions of Broker (broker.hpp).
#include <sched.h>

#include <algorithm>
#include <thread>

#include <fmt/format.h>

#include "broker/broker.hpp"
#include "broker/model_state.hpp"
#include "devices/cpu_quota.hpp"

namespace loch::broker {

// The affinity mask, bounded by the cgroup's CFS quota (a pod's CPU limit: devices/cpu_quota.hpp), at
// least 1.
std::uint32_t cpus_loch_may_use(const devices::Sysroot& root) {
    cpu_set_t set;
    CPU_ZERO(&set);
    std::uint32_t n = ::sched_getaffinity(0, sizeof set, &set) == 0
                          ? static_cast<std::uint32_t>(CPU_COUNT(&set))
                          : std::thread::hardware_concurrency();
    if (const auto quota = devices::cpu_quota(root)) n = std::min(n, static_cast<std::uint32_t>(*quota));
    return std::max(1u, n);
}

std::optional<std::uint32_t> Broker::cpu_threads_of(const Model& m) const {
    if (m.device.empty()) return std::nullopt;  // not placed: not running
    // On a GPU too, where its settings keep work on the CPU (partial offload, sd's CPU phases).
    std::uint32_t layers = 0;
    if (m.footprint)
        for (const auto& n : m.footprint->needs)
            if (n.device == m.device) layers = n.layers;
    const auto where = m.device == "cpu" ? engines::Placement{} : m.where;
    const auto t = m.kind->cpu_threads(*m.cfg, where, cpu_cores_, layers);
    return t ? std::optional(std::min(*t, cpu_cores_)) : std::nullopt;
}

std::optional<std::string> Broker::cpu_threads_wait(const Model& m, config::Priority priority) const {
    if (!policy_->takes_turns() || m.active > 0) return std::nullopt;
    const auto mine = cpu_threads_of(m);
    if (!mine) return std::nullopt;
    std::uint32_t busy = 0;
    std::vector<std::string> who;
    for (const auto& [name, o] : models_) {
        if (o.get() == &m || o->active == 0 || !o->engine) continue;
        if (priority == config::Priority::interactive && o->active_interactive == 0) continue;  // it yields
        if (const auto t = cpu_threads_of(*o)) {
            busy += *t;
            who.push_back(fmt::format("'{}' ({} thread(s))", name, *t));
        }
    }
    if (busy == 0 || busy + *mine <= cpu_cores_) return std::nullopt;
    return fmt::format(
        "the CPU's {} core(s) compute for {}; this engine's {} thread(s) wait for them rather than slow both "
        "(args.threads of engines that run at once adding up to the cores lets them run side by side)",
        cpu_cores_, fmt::join(who, ", "), *mine);
}

nlohmann::json Broker::cpu_threads_view() const {
    nlohmann::json computing = nlohmann::json::object();
    for (const auto& [name, m] : models_)
        if (const auto t = cpu_threads_of(*m); t && m->active > 0 && m->engine) computing[name] = *t;
    return {{"cores", cpu_cores_}, {"computing", computing}};
}

}  // namespace loch::broker
