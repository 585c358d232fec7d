// devices/usable — THE rule for how many bytes loch may plan into on a device. One function, used by
// `loch devices`, the doctor and the broker alike (docs/devices.md, "The usable-memory rule"):
//
//   discrete GPU:        VRAM free                       (NVML free / sysfs vram_total - vram_used)
//   integrated (APU):    min(GTT headroom, MemAvailable, cgroup headroom)
//                        GTT headroom = min(mem_info_gtt_total, ttm.pages_limit x 4 KiB) - mem_info_gtt_used
//   CPU:                 min(MemAvailable, cgroup headroom)
//   cgroup headroom = memory.max - memory.current, only when a limit is set.
//
// On an APU the BIOS carve-out ("VRAM") is deliberately not a term: allocations go through GTT, and the
// carve-out is RAM the OS cannot use. A required figure that is unknown makes the budget unknown, never a
// guess.
#pragma once

#include "devices/device.hpp"

namespace loch::devices {

UsableBudget usable_budget(const Device& device, const SystemInfo& system);

// The largest budget over all devices that have one (what the biggest single-device model can use).
const Device* roomiest_device(const DeviceReport& report);

}  // namespace loch::devices
