// cli/config_limits — what a config asks of this machine's devices, for `loch serve` and `loch doctor -c`:
// which devices to probe for it (Vulkan where a Vulkan engine could run), and its configured limits that no
// device can ever keep (broker/never_fits.hpp on the devices probed now, as the broker's ledger reads them).
#pragma once

#include <filesystem>
#include <string>
#include <vector>

#include "config/config.hpp"
#include "doctor/doctor.hpp"

namespace loch::cli {

// Vulkan is probed (once: libvulkan loads every driver) where a Vulkan engine could run: a device configured
// for it, or a Vulkan build of some engine.
bool uses_vulkan(const config::Config& cfg);
// A software Vulkan device (lavapipe) is offered only where the config names a `vulkan:N` device.
bool names_vulkan_device(const config::Config& cfg);

// Each model whose configured limit can never run on the devices it may use (its `devices:`, else every GPU
// an engine build of its kind reaches, else the CPU), probed under `sysroot` now.
std::vector<doctor::LimitNeverFits> config_limits(const config::Config& cfg,
                                                  const std::filesystem::path& sysroot);

}  // namespace loch::cli
