// broker/device_source — the broker's view of the devices: total and used per device id, refreshed on the
// broker's tick (and after an engine stops, to see that its memory is really free).
//
// ProbedDevices reads them through the devices module (the same probes `loch devices` prints);
// FixedDevices is for configurations that name only a budget (and for the unit tests of the broker logic).
#pragma once

#include <map>
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
    std::optional<MemoryFigure> driver_reserved;  // never free (NVML v2 `reserved`)
    std::map<int, std::uint64_t> process_bytes;   // per PID, where the platform reports it (NVML, fdinfo)
    std::string name;
};

class DeviceSource {
  public:
    virtual ~DeviceSource() = default;
    virtual std::vector<DeviceSnapshot> snapshot() = 0;
    // Resident memory of a process on the CPU (RSS: anonymous + mapped file pages); nullopt if unknown.
    virtual std::optional<std::uint64_t> resident_bytes(int /*pid*/) { return std::nullopt; }
};

// The live machine via devices::probe() (GPUs through NVML / sysfs, the CPU through /proc/meminfo).
class ProbedDevices : public DeviceSource {
  public:
    std::vector<DeviceSnapshot> snapshot() override;
    std::optional<std::uint64_t> resident_bytes(int pid) override;  // /proc/PID/status VmRSS
};

class FixedDevices : public DeviceSource {
  public:
    explicit FixedDevices(std::vector<DeviceSnapshot> devices) : devices_(std::move(devices)) {}
    std::vector<DeviceSnapshot> snapshot() override { return devices_; }

  private:
    std::vector<DeviceSnapshot> devices_;
};

}  // namespace loch::broker
