// broker/admission — the pure decision for a model that is not running: start it, evict idle models first,
// refuse at once, or wait. No I/O: the broker feeds it a snapshot (ledger + engines) and acts on the answer.
//
// Rules (docs/broker.md explains why):
//   1. fits on an allowed device now (and no other load is in flight there) → start there;
//   2. fits after stopping idle, unpinned engines of equal or lower priority → stop them (cheapest to
//      reload first: idle time ÷ (load time × weight)), then start; a person's idle model that people use
//      at least twice as much as the one asked for now is kept, and the request waits for batch work
//      that yields to it instead (2a); a more important idle engine goes for a lower-priority request once
//      it has been idle twice its reload time (2b: batch work waits for a person's idle model no longer than
//      the person's swap is worth);
//      — unless engines already stopping there free enough with what is free: then wait for them (a
//      second pass before an evicted GPU engine has exited must not stop another one);
//   3. does not fit even on an empty allowed device → refuse now, with the numbers and what would help;
//   4. otherwise → wait (queue) until memory frees.
// Several GPUs (issue 14): a model may also be split over a set of devices (llama.cpp --split-mode layer),
// which needs every part's memory at once. Splitting costs speed, so a split is taken only where no single
// device will do now: rules 1 and 2 try every single device before any split (a split is preferred to
// waiting for one device), splits go in the order given (fewest devices first), and a model is refused only
// when no split can ever fit either — with each device's need and what can be free there.
#pragma once

#include <cstdint>
#include <optional>
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
    // A split engine's reservations on its other devices: stopping it frees those too.
    std::vector<std::pair<std::string, std::uint64_t>> also_on;
    int priority = 0;        // higher = more important (interactive > batch)
    bool evictable = false;  // ready, idle (no request in flight, none queued), not pinned
    double idle_s = 0;
    double load_s = 1;    // last measured load time, or an estimate
    double weight = 1;    // configured importance
    std::string held_as;  // why it stays when not evictable: "busy", "loading", "pinned", "wanted", …
    // Busy with batch requests only: it yields to interactive work (no new batch request is granted while
    // an interactive one waits for its device), so it is idle within its current requests' time.
    bool batch_only = false;
    // Stopping (evicted, idle past its keep-alive, reloaded): its memory is on its way back. A GPU engine
    // takes from a tenth of a second to seconds to exit and hand it back.
    bool stopping = false;
    // Interactive requests granted on it in the last few minutes (Broker::Model::people_uses).
    std::uint32_t recent_uses = 0;
};

// Higher = a better victim (idle long, cheap to reload, unimportant).
double victim_score(const EngineView& e);
// What the engine holds on `device` (0 when it holds nothing there).
std::uint64_t bytes_on(const EngineView& e, const std::string& device);

// A model split over several devices: one Need per device, the main device (compute, output) first.
struct SplitNeed {
    std::vector<Need> parts;
    std::string how;            // how it is split, for the reason ("--split-mode layer --tensor-split 3,2")
    std::vector<float> shares;  // each device's share of the layers (for the launch), main first
};

// Its devices, the main one first.
std::vector<std::string> split_devices(const SplitNeed& split);

// One device of a refused split: what it would need there and what can ever be free there.
struct RefusedPart {
    std::string device;
    std::uint64_t need = 0;
    std::uint64_t capacity = 0;
    std::uint64_t free = 0;
};

struct Refusal {
    std::uint64_t need = 0;          // on the device closest to fitting
    std::uint64_t capacity = 0;      // that device's capacity with no engine of loch running
    std::uint64_t largest_free = 0;  // the most free memory on any allowed device right now
    std::string device;
    std::uint64_t empty_capacity = 0;     // the device with nothing on it but the driver (and the reserve)
    std::uint64_t outside = 0;            // what other programs hold there now
    std::uint64_t driver_reserved = 0;    // what the driver keeps for itself
    std::vector<std::string> would_help;  // human advice with numbers
    std::vector<RefusedPart> split;       // the split closest to fitting, per device (when there were splits)
    Source need_source = Source::formula;  // where `need` came from
    std::string need_detail;  // how `need` was decided (a host part names the device it sits beside)
};

struct Decision {
    enum class Kind { start, evict_then_start, wait, refuse };
    Kind kind = Kind::wait;
    std::string device;                // start / evict_then_start (a split: its main device)
    std::vector<std::string> devices;  // a split: every device it starts on, the main one first
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
    std::vector<SplitNeed> splits;             // fewest devices first; tried after every single device
    std::uint32_t recent_uses = 0;             // the model's own, as EngineView::recent_uses
};

Decision decide(const AdmissionInput& in, const Ledger& ledger);

// Whether `in`'s model would start now, or after stopping idle engines — `soon_idle` counted among them (busy
// engines whose requests end no later than `engine`'s would drain) — with `engine` (and its running
// requests' own memory) kept as it is, and the idle models people use most kept too (rule 2a's): batch work
// yields for room only where the person's admission needs that room (issue 54, broker/yielding.cpp).
bool admitted_without(AdmissionInput in, const Ledger& ledger, const std::string& engine,
                      const std::vector<std::string>& soon_idle);

// Concrete advice when a model cannot fit: context, slots, quantization, CPU layers.
std::vector<std::string> what_would_help(const Need& need, std::uint64_t capacity);

// What a need on a discrete device also takes in the host's RAM (Need::host_bytes), as a need on `cpu`:
// admitted with it, and booked beside it under the same holder (Broker::begin_load). nullopt when it has
// none, is on the CPU itself, or the ledger knows no `cpu`.
std::optional<Need> host_part(const Need& n, const Ledger& ledger);

}  // namespace loch::broker
