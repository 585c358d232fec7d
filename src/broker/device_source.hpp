// broker/device_source — the broker's view of the devices: total and used per device id, refreshed on the
// broker's tick (and after an engine stops, to see that its memory is really free).
//
// ProbedDevices reads them through the devices module (the same probes `loch devices` prints);
// FixedDevices is for configurations that name only a budget (and for the unit tests of the broker logic).
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "core/memory.hpp"

namespace loch::broker {

struct DeviceSnapshot {
    std::string id;
    MemoryFigure total;
    std::optional<MemoryFigure>
        used;  // whole device, including loch's engines; unknown → no outside use known
    std::string name;
};

class DeviceSource {
  public:
    virtual ~DeviceSource() = default;
    virtual std::vector<DeviceSnapshot> snapshot() = 0;
};

// The live machine via devices::probe() (GPUs through NVML / sysfs, the CPU through /proc/meminfo).
class ProbedDevices : public DeviceSource {
  public:
    std::vector<DeviceSnapshot> snapshot() override;
};

class FixedDevices : public DeviceSource {
  public:
    explicit FixedDevices(std::vector<DeviceSnapshot> devices) : devices_(std::move(devices)) {}
    std::vector<DeviceSnapshot> snapshot() override { return devices_; }

  private:
    std::vector<DeviceSnapshot> devices_;
};

}  // namespace loch::broker
