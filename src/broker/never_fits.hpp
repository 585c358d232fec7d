// broker/never_fits — what the config promises that no device can keep, said at start (issue 51): for one
// model, whether a configured limit (an image's max_size, context × slots, an audio length) can never run on
// any device it may use within that device's capacity, asked of the model's kind. Pure: the broker asks it at
// start and after a reload with its ledger; `loch doctor -c` with the devices it probes. The device views the
// ledger is built from (limits_of, placement_of) are here too, so that both read a probe the same way.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "broker/device_source.hpp"
#include "broker/ledger.hpp"
#include "config/config.hpp"
#include "engines/kind.hpp"
#include "engines/spec.hpp"

namespace loch::broker {

// A device a model may run on: where an engine would be placed there, and all it could ever have there.
struct DeviceRoom {
    engines::Placement where;
    std::uint64_t capacity = 0;
};

// The kind's lines about the device with the most room when none of `devices` can keep the model's limits;
// empty when one can, when there is none, or when several GPUs may split it (a split may run what one
// cannot).
std::vector<std::string> limits_that_never_fit(const engines::Kind& kind, const config::Config& cfg,
                                               const config::ModelConfig& model,
                                               const std::vector<DeviceRoom>& devices);

// The devices a model may run on, in order: its `devices:`, else every known GPU — only those an engine build
// of its kind reaches (a CPU build started with `--device CUDA0` exits; `backend` names the backend each
// device's engines run) — and the CPU when allowed explicitly, as a configured fallback, or when the machine
// has nothing else for this kind (the doctor says so loudly at start, `loch devices` too).
std::vector<std::string> allowed_devices(const config::Config& cfg, const config::ModelConfig& model,
                                         const std::vector<std::string>& known,
                                         const std::function<std::string(const std::string&)>& backend);

// The ledger's limits for a probed device as `backend`'s engines see it: its pool, the configured reserve and
// budget, the driver's own share; for Vulkan the DEVICE_LOCAL heap and the largest allocation.
DeviceLimits limits_of(const DeviceSnapshot& d, const config::Config& cfg, const std::string& backend);
// Where a `backend` engine is placed on a probed device (its ordinal as that backend numbers it).
engines::Placement placement_of(const DeviceSnapshot& d, const std::string& backend);
// The backend the config picks for a probed device (its `backend:`, else the best build found).
std::string backend_of(const DeviceSnapshot& d, const config::Config& cfg);

}  // namespace loch::broker
