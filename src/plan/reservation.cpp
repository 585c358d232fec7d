#include "plan/reservation.hpp"

namespace loch::plan {

DryRunCandidate dry_run_candidate(const DryRunResult& dry, bool cpu, const DevicePlan* dp) {
    DryRunCandidate c;
    for (const auto& d : dry.devices) {
        if (cpu != (d.device == "cpu")) continue;
        c.counted += d.total();
        c.weights += d.model.bytes;
        c.kv += d.context.bytes;
    }
    if (!dp) return c;
    c.leaves_out = dp->overhead.bytes;
    if (cpu) {
        const std::uint64_t resident = dp->weights.bytes + dp->repack.bytes;
        if (resident > c.weights) c.leaves_out += resident - c.weights;
    }
    return c;
}

}  // namespace loch::plan
