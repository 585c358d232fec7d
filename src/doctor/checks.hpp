// doctor/checks — the individual checks behind diagnose(); each appends its findings. Internal to doctor.
#pragma once

#include "doctor/doctor.hpp"

namespace loch::doctor::checks {

using devices::DeviceReport;
using Findings = std::vector<Finding>;

void apu_gtt_ceiling(const DeviceReport& r, const Input& in, Findings& out);
void unified_memory_env(const DeviceReport& r, const Input& in, Findings& out);
void linux_firmware_broken(const DeviceReport& r, const Input& in, Findings& out);
void hsa_override_gfx(const DeviceReport& r, const Input& in, Findings& out);
void vulkan_heap_too_small(const DeviceReport& r, const Input& in, Findings& out);
void max_map_count(const DeviceReport& r, const Input& in, Findings& out);
void outside_gpu_process(const DeviceReport& r, const Input& in, Findings& out);
void container_memory_limit(const DeviceReport& r, const Input& in, Findings& out);
void memory_limit_below_model(const DeviceReport& r, const Input& in, Findings& out);
void model_does_not_fit(const DeviceReport& r, const Input& in, Findings& out);
void budget_unknown(const DeviceReport& r, const Input& in, Findings& out);
void engine_build_missing(const DeviceReport& r, const Input& in, Findings& out);
void limit_never_fits(const DeviceReport& r, const Input& in, Findings& out);

// Evidence helpers: "24.00 GiB (25769803776 B)" and the figure's source.
Evidence figure_evidence(std::string what, const MemoryFigure& f);
Evidence figure_evidence(std::string what, const devices::ProbedFigure& f);
std::string bytes_text(std::uint64_t b);
const ModelDemand* largest_model(const Input& in);

}  // namespace loch::doctor::checks
