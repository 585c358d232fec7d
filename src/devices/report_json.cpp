#include "devices/report_json.hpp"

namespace loch::devices {

namespace {

template <class T>
nlohmann::json probed(const Probed<T>& p) {
    if (!p) return {{"unknown", p.detail}};
    return {{"value", *p.value}, {"source", p.detail}};
}

}  // namespace

nlohmann::json to_json(const ProbedFigure& f) {
    if (!f) return {{"unknown", f.detail}};
    nlohmann::json j;
    loch::to_json(j, *f.value);
    return j;
}

nlohmann::json to_json(const Device& d) {
    nlohmann::json pools = nlohmann::json::array();
    for (const auto& p : d.pools)
        pools.push_back({{"kind", to_string(p.kind)},
                         {"total", to_json(p.total)},
                         {"used", to_json(p.used)},
                         {"free", to_json(p.free)},
                         {"reserved", to_json(p.reserved)}});
    nlohmann::json procs = nlohmann::json::array();
    for (const auto& p : d.processes) {
        nlohmann::json bytes;
        loch::to_json(bytes, p.bytes);
        procs.push_back(
            {{"pid", p.pid}, {"command", p.command}, {"pool", to_string(p.pool)}, {"bytes", bytes}});
    }
    nlohmann::json terms = nlohmann::json::array();
    for (const auto& t : d.usable.terms) {
        nlohmann::json bytes;
        loch::to_json(bytes, t.bytes);
        terms.push_back({{"name", t.name}, {"bytes", bytes}});
    }
    nlohmann::json usable = to_json(d.usable.budget);
    usable["rule"] = d.usable.rule;
    usable["terms"] = terms;
    if (!d.usable.binding.empty()) usable["binding"] = d.usable.binding;
    nlohmann::json j{{"id", d.id},
                     {"vendor", to_string(d.vendor)},
                     {"kind", to_string(d.kind)},
                     {"kind_reason", d.kind_reason},
                     {"name", d.name},
                     {"pools", pools},
                     {"processes", procs},
                     {"processes_note", d.processes_note},
                     {"driver_version", probed(d.driver_version)},
                     {"firmware_version", probed(d.firmware_version)},
                     {"compute", probed(d.compute)},
                     {"vulkan_device_local_heap", to_json(d.vulkan_device_local_heap)},
                     {"vulkan_max_allocation", to_json(d.vulkan_max_allocation)},
                     {"usable", usable}};
    if (!d.pci_slot.empty()) j["pci_slot"] = d.pci_slot;
    if (!d.pci_device_id.empty()) j["pci_device_id"] = d.pci_device_id;
    if (d.vulkan_index) j["vulkan_index"] = *d.vulkan_index;
    if (d.software) j["software"] = true;
    return j;
}

nlohmann::json to_json(const SystemInfo& s) {
    // The environment is reduced to the variables that change how engines use memory: it may hold secrets.
    nlohmann::json env = nlohmann::json::object();
    for (const auto& [k, v] : s.env)
        if (k.rfind("GGML_", 0) == 0 || k.rfind("HSA_", 0) == 0 || k.rfind("HIP_", 0) == 0 ||
            k.rfind("ROCR_", 0) == 0 || k.rfind("CUDA_", 0) == 0 || k.rfind("LOCH_", 0) == 0)
            env[k] = v;
    return {{"mem_total", to_json(s.mem_total)},
            {"mem_available", to_json(s.mem_available)},
            {"cgroup", probed(s.cgroup)},
            {"cgroup_max", to_json(s.cgroup_max)},
            {"cgroup_current", to_json(s.cgroup_current)},
            {"cmdline", probed(s.cmdline)},
            {"kernel", probed(s.kernel)},
            {"ttm_pages_limit", probed(s.ttm_pages_limit)},
            {"amdgpu_gttsize_mib", probed(s.amdgpu_gttsize_mib)},
            {"max_map_count", probed(s.max_map_count)},
            {"linux_firmware", probed(s.linux_firmware)},
            {"iommu_enabled", probed(s.iommu_enabled)},
            {"cpu_name", s.cpu_name},
            {"env", env},
            {"env_source", s.env_source}};
}

nlohmann::json to_json(const DeviceReport& r) {
    nlohmann::json devices = nlohmann::json::array();
    for (const auto& d : r.devices) devices.push_back(to_json(d));
    return {{"devices", devices}, {"system", to_json(r.system)}, {"notes", r.notes}};
}

}  // namespace loch::devices
