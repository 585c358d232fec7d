// broker/admission — the pure decision for a model that is not running: start it, evict idle models first,
// refuse at once, or wait. No I/O: the broker feeds it a snapshot (ledger + engines) and acts on the answer.
//
// Rules (docs/broker.md explains why):
//   1. fits on an allowed device now (and no other load is in flight there) → start there;
//   2. fits after stopping idle, unpinned engines of equal or lower priority → stop them (cheapest to
//      reload first: idle time ÷ (load time × weight)), then start;
//   3. does not fit even on an empty allowed device → refuse now, with the numbers and what would help;
//   4. otherwise → wait (queue) until memory frees.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include <nlohmann/json_fwd.hpp>

#include "broker/ledger.hpp"
#include "core/footprint.hpp"

namespace loch::broker {

using loch::Need;

// One engine as admission sees it.
struct EngineView {
    std::string name;
    std::string device;
    std::uint64_t bytes = 0;  // its reservation on `device`
    int priority = 0;         // higher = more important (interactive > batch)
    bool evictable = false;   // ready, idle (no request in flight, none queued), not pinned
    double idle_s = 0;
    double load_s = 1;    // last measured load time, or an estimate
    double weight = 1;    // configured importance
    std::string held_as;  // why it stays when not evictable: "busy", "loading", "pinned", "wanted", …
};

// Higher = a better victim (idle long, cheap to reload, unimportant).
double victim_score(const EngineView& e);

struct Refusal {
    std::uint64_t need = 0;          // on the device closest to fitting
    std::uint64_t capacity = 0;      // that device's capacity with no engine of loch running
    std::uint64_t largest_free = 0;  // the most free memory on any allowed device right now
    std::string device;
    std::uint64_t empty_capacity = 0;     // the device with nothing on it but the driver (and the reserve)
    std::uint64_t outside = 0;            // what other programs hold there now
    std::uint64_t driver_reserved = 0;    // what the driver keeps for itself
    std::vector<std::string> would_help;  // human advice with numbers
};

struct Decision {
    enum class Kind { start, evict_then_start, wait, refuse };
    Kind kind = Kind::wait;
    std::string device;                // start / evict_then_start
    std::vector<std::string> victims;  // evict_then_start, in stop order
    std::uint64_t freed_bytes = 0;     // what stopping the victims returns
    Refusal refusal;                   // refuse
    std::string reason;                // one line for logs, /loch/plan and queue status
};
std::string_view to_string(Decision::Kind k);
void to_json(nlohmann::json& j, const Decision& d);

struct AdmissionInput {
    std::vector<Need> needs;  // one per allowed device, in preference order
    int priority = 0;
    std::vector<EngineView> engines;           // every engine that holds a reservation
    std::vector<std::string> devices_loading;  // devices with a load in flight
};

Decision decide(const AdmissionInput& in, const Ledger& ledger);

// Concrete advice when a model cannot fit: context, slots, quantization, CPU layers.
std::vector<std::string> what_would_help(const Need& need, std::uint64_t capacity);

}  // namespace loch::broker
