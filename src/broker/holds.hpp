// broker/holds — device memory for work that loch does not launch as a server: a job started by `loch run`
// (a training run, a captioning script) or a hold that a long-lived program declares over HTTP (a notebook,
// ComfyUI). A hold is one more holder in the ledger: granted through the same admission and the same queue as
// requests (it evicts idle engines, waits with its reason, or is refused at once with the numbers), and
// engines wait for it like for any holder that cannot give memory back. loch never kills a job for memory.
//
// Life of a hold: waiting (queued; its client polls it, which is also its heartbeat) → granted (booked on one
// device; the client gets that device's visibility variables) → released (DELETE, its heartbeat stopped for
// `ttl`, or — for a job with a process group — the group is gone). While granted, a job's process group is
// measured each tick (NVML per process on NVIDIA, DRM fdinfo on AMD, RSS on the CPU) and the hold rises to
// the measured use; the peak is remembered per job name and sizes the next run that gives no size.
#pragma once

#include <chrono>
#include <cstdint>
#include <optional>
#include <string>

#include <nlohmann/json_fwd.hpp>

#include "config/config.hpp"

namespace loch::broker {

struct HoldSpec {
    std::string name;                    // shown everywhere; the key of its remembered peak ("train")
    std::optional<std::uint64_t> bytes;  // asked for; else `like`'s footprint, else the remembered peak
    std::string like;                    // a model whose planned footprint is the size (`loch run --like`)
    std::string device = "auto";         // "auto" = any allowed GPU (else the CPU), or one device id
    config::Priority priority = config::Priority::interactive;
    std::chrono::seconds ttl{30};  // released when no heartbeat came for this long
    std::optional<int> pgid;       // a job's process group: measured, and released once it is gone
    std::string command;           // what runs (display only)
    std::string owner;             // the user it runs as (display only)
    // Re-registered by a job that already runs (loch restarted under it): booked at once, never queued —
    // its memory is in use whatever loch decides.
    bool running = false;
};

// Parses a POST /loch/holds body. Throws broker::Error(invalid_request) with the field named.
HoldSpec hold_spec_from_json(const nlohmann::json& body);

}  // namespace loch::broker
