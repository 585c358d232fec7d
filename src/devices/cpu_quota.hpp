// devices/cpu_quota — how many CPUs loch's cgroup may use. A pod's CPU limit (K3s), a container's --cpus or a
// unit's CPUQuota= is a CFS quota, not an affinity mask: the process sees every core, and an engine's
// default threads follow the machine's cores. The broker counts the quota (broker/cpu_threads.cpp).
//   cgroup v2: `cpu.max` ("<quota> <period>", or "max <period>" for none), the tightest from loch's cgroup up
//              to the root;
//   cgroup v1: the cpu controller's `cpu.cfs_quota_us` (-1 for none) / `cpu.cfs_period_us`.
#pragma once

#include <optional>

#include "devices/sysroot.hpp"

namespace loch::devices {

// The CPUs the quota allows (2.5 for "250000 100000"); nullopt without a quota or a cgroup.
std::optional<double> cpu_quota(const Sysroot& root);

}  // namespace loch::devices
