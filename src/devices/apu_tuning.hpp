// devices/apu_tuning — an APU whose BIOS carve-out ("VRAM") is larger than the GTT ceiling its ROCm engines
// really allocate from (hipMalloc on an APU draws from GTT): the figures, and the BIOS setting and kernel
// parameters that give GTT the machine's RAM. One computation for the doctor's `apu-gtt-ceiling` and the
// broker's refusals on that device, so both name the same parameters.
#pragma once

#include <cstdint>
#include <optional>
#include <string>

#include "devices/device.hpp"

namespace loch::devices {

struct GttCeiling {
    std::uint64_t ceiling = 0;    // min(GTT total, ttm.pages_limit x 4 KiB)
    std::string ceiling_from;     // "amdgpu.gttsize (mem_info_gtt_total)" or "ttm.pages_limit"
    std::uint64_t carve_out = 0;  // the VRAM pool's total
    // The machine's RAM (what the OS sees + the carve-out, to a GiB) and GTT's goal (4 GiB left to the OS);
    // unknown without MemTotal.
    std::optional<std::uint64_t> physical, target;
    std::string kernel_parameters;  // "amd_iommu=off amdgpu.gttsize=<MiB> ttm.pages_limit=<pages>"
    // What to do, in one sentence with the numbers.
    std::string fix() const;
};

// Set only for an AMD APU whose carve-out exceeds its GTT ceiling.
std::optional<GttCeiling> gtt_ceiling_below_carve_out(const Device& d, const SystemInfo& s);

}  // namespace loch::devices
