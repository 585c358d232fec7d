// broker/eta — when a waiter may be served, from measured durations only. Where loch has measured nothing
// that says (no request of that model has finished, no earlier run of that job, a load never timed), the
// answer is "unknown" with the reason: an ETA is never invented. Pure arithmetic, unit-tested; the broker
// fills the inputs from what it measured.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json_fwd.hpp>

namespace loch::broker {

struct Eta {
    std::optional<double> seconds;  // nullopt = unknown
    std::string basis;              // how it was computed, or why it is unknown
};
void to_json(nlohmann::json& j, const Eta& e);  // {"eta_s": N|null, "eta": basis}

// A request waiting for its model's slot or its load.
struct SlotWait {
    bool loading = false;
    std::optional<double> load_s;  // the last measured load time
    double loading_elapsed_s = 0;
    std::uint32_t slots = 1;
    std::uint32_t active = 0;
    std::size_t ahead = 0;                // requests for the same model queued before it
    std::optional<double> avg_request_s;  // measured mean duration (nullopt: none has finished)
};
Eta slot_eta(const SlotWait& w);

// One holder of memory on the device a waiter needs room on, and when it is expected to give it back.
struct HolderEnd {
    std::string name;
    std::uint64_t bytes = 0;
    std::optional<double> ends_in_s;  // nullopt: unknown
    std::string why;  // "3 requests at 4.2 s each", "job 'train': 40 min last run, 12 min so far"
};
// Memory waits: the earliest time by which enough holders are expected to have ended for `need` to fit beside
// `free`. Unknown when the holders that must end include one whose end is unknown.
Eta memory_eta(std::uint64_t need, std::uint64_t free, std::vector<HolderEnd> holders);

}  // namespace loch::broker
