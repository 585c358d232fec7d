// broker/outlook — how one model would be served on this box now, in a few words a load balancer can act
// on (balancer/agent_answer turns it into HAProxy's agent line). Broker::outlook fills it without waiting:
// it is asked every second per model by every balancer.
#pragma once

#include <cstdint>
#include <string>

namespace loch::broker {

struct Outlook {
    enum class Fit {
        unknown_model,
        resident,       // ready or loading here
        fits_now,       // would start now without stopping anything
        fits_evicting,  // would start after stopping idle models
        fits_later,     // fits an empty device here, but busy or loading ones stand in the way now
        planning,       // its memory is being estimated (the first question after start-up)
        never,          // larger than any allowed device here, even empty
    };
    Fit fit = Fit::unknown_model;
    std::uint32_t slots = 0, active = 0;        // resident: its slots and the requests on them
    std::uint64_t queued = 0, queue_limit = 0;  // its priority class's queue
    double free_share_after = 0;                // fits_*: free memory left after it loads, of capacity
    std::string why;                            // never / fits_later: the numbers, one line
};

}  // namespace loch::broker
