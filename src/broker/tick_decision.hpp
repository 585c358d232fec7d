// broker/tick_decision — what the broker's tick decides, as pure functions of what it saw: which idle engines
// have outlived their keep_alive (stopped, their conversations saved), when the next one will (how long the
// idle tick may sleep), and which idle holders go when a device is over its capacity because an engine grew
// past its reservation (the runtime guard). The broker gathers the facts and carries out the effects
// (observation.cpp); tests assert on the decisions alone.
#pragma once

#include <chrono>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "broker/engine_state.hpp"

namespace loch::broker {

using TickTime = std::chrono::steady_clock::time_point;

// One engine as the keep-alive rule sees it.
struct IdleFacts {
    std::string model;
    ModelState state = ModelState::stopped;
    std::uint32_t active = 0;                        // its running requests
    bool pinned = false;                             // never stopped for idleness
    std::optional<std::chrono::seconds> keep_alive;  // nullopt: forever
    TickTime last_used{};
    bool wanted = false;  // a queued request waits for it
};

// Effect: stop `model` (saving its conversations), for `why`.
struct StopIdle {
    std::string model;
    std::string why;
};

// Ready engines with no running request, not pinned and not wanted, idle for at least their keep_alive.
std::vector<StopIdle> expired_engines(const std::vector<IdleFacts>& engines, TickTime now);

// How long until the first ready engine's keep_alive runs out (it may be negative: overdue), or `cap` when
// none comes sooner. Running requests do not count here: a busy broker ticks at its short tick anyway.
std::chrono::steady_clock::duration until_next_expiry(const std::vector<IdleFacts>& engines, TickTime now,
                                                      std::chrono::steady_clock::duration cap);

// An idle holder of memory on an overcommitted device (ready, no running request, not pinned, not the one
// that grew).
struct IdleHolder {
    std::string name;
    TickTime last_used{};
    std::uint64_t reserved = 0;  // its reservation on that device
};

// Effect: the device is `over` its capacity; evict `victims` (maybe none: nothing idle to give back).
struct Relief {
    std::uint64_t over = 0;
    std::vector<std::string> victims;
};

// nullopt while `booked` ≤ `capacity`. Otherwise the longest idle go first, until their reservations cover
// the excess. A holder with running requests is never a victim: its work would be lost, and the memory the
// grown engine took is what loch guards, not what it kills for.
std::optional<Relief> relieve_overcommit(std::uint64_t capacity, std::uint64_t booked,
                                         std::vector<IdleHolder> idle);

}  // namespace loch::broker
