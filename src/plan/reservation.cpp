#include "plan/reservation.hpp"

#include <algorithm>

namespace loch::plan {

DryRunCandidate dry_run_candidate(const DryRunResult& dry, bool cpu, const DevicePlan* dp,
                                  std::uint64_t counted_in_excess) {
    DryRunCandidate c;
    for (const auto& d : dry.devices) {
        if (cpu != (d.device == "cpu")) continue;
        c.counted += d.total();
        c.weights += d.model.bytes;
        c.kv += d.context.bytes;
    }
    // (Never below its weights and KV: the excess is compute and output only.)
    c.counted -= std::min(counted_in_excess, c.counted > c.weights + c.kv ? c.counted - c.weights - c.kv : 0);
    if (!dp) return c;
    c.leaves_out = dp->overhead.bytes;
    c.leaves_out += dp->adapters.bytes;  // llama-fit-params never loads LoRA adapters
    c.leaves_out += dp->draft.bytes;     // nor a draft model (its flags are the server's)
    if (cpu) {
        const std::uint64_t resident = dp->weights.bytes + dp->repack.bytes;
        if (resident > c.weights) c.leaves_out += resident - c.weights;
    }
    return c;
}

std::uint64_t dry_run_excess(const gguf::Model& model, const Settings& server, const std::string& device) {
    Settings as_fit = server;
    as_fit.n_outputs_max = server.n_batch;
    try {
        const Plan a = make_plan(model, server), b = make_plan(model, as_fit);
        const DevicePlan *da = a.find(device), *db = b.find(device);
        if (!da || !db) return 0;
        const std::uint64_t sa = da->compute.bytes + da->output.bytes,
                            sb = db->compute.bytes + db->output.bytes;
        return sb > sa ? sb - sa : 0;
    } catch (const std::exception&) {
        return 0;
    }
}

}  // namespace loch::plan
