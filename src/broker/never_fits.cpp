#include "broker/never_fits.hpp"

#include <algorithm>

namespace loch::broker {

std::vector<std::string> limits_that_never_fit(const engines::Kind& kind, const config::Config& cfg,
                                               const config::ModelConfig& model,
                                               const std::vector<DeviceRoom>& devices) {
    const auto gpus = std::count_if(devices.begin(), devices.end(),
                                    [](const DeviceRoom& d) { return d.where.backend != "cpu"; });
    if (devices.empty() || gpus > 1) return {};
    std::vector<std::string> lines;
    std::uint64_t best = 0;
    for (const auto& d : devices) {
        auto said = kind.limits_that_never_fit(cfg, model, d.where, d.capacity);
        if (said.empty()) return {};
        if (d.capacity >= best) best = d.capacity, lines = std::move(said);
    }
    return lines;
}

std::vector<std::string> allowed_devices(const config::Config& cfg, const config::ModelConfig& model,
                                         const std::vector<std::string>& known,
                                         const std::function<std::string(const std::string&)>& backend) {
    const auto reached = [&](const std::string& d) { return cfg.reaches(model.engine, backend(d)); };
    std::vector<std::string> out;
    if (!model.devices.empty()) {
        out = model.devices;
    } else {
        for (const auto& d : known)
            if (d != "cpu") out.push_back(d);
    }
    std::erase_if(out, [&](const std::string& d) { return !reached(d); });
    const bool no_gpu =
        std::none_of(known.begin(), known.end(), [&](const auto& d) { return d != "cpu" && reached(d); });
    if ((model.cpu_fallback || (model.devices.empty() && no_gpu)) && reached("cpu") &&
        std::find(out.begin(), out.end(), "cpu") == out.end())
        out.push_back("cpu");
    return out;
}

DeviceLimits limits_of(const DeviceSnapshot& d, const config::Config& cfg, const std::string& backend) {
    const auto dc = cfg.device(d.id);
    DeviceLimits l;
    l.id = d.id;
    l.total = d.total;
    l.reserve = {dc.reserve, Source::configured, "devices." + d.id + ".reserve"};
    if (dc.budget) l.cap = MemoryFigure{*dc.budget, Source::configured, "devices." + d.id + ".budget"};
    if (d.driver_reserved) l.driver_reserved = *d.driver_reserved;
    // A Vulkan engine allocates from the driver's DEVICE_LOCAL heap, not from the pool the probe counts (GTT
    // on an APU): where the heap is smaller it bounds the device (the ROCm build could use more); where it is
    // larger — RADV on an APU with a large carve-out reports 2/3 of carve-out + GTT — it is the device's
    // total for this build.
    if (backend == "vulkan") {
        if (d.vulkan_heap) {
            const std::string what = "the Vulkan DEVICE_LOCAL heap (backend vulkan, " +
                                     d.vulkan_heap->detail + "): all a Vulkan engine can allocate";
            if (d.vulkan_heap->bytes < d.total.bytes)
                l.backend_bound = MemoryFigure{d.vulkan_heap->bytes, Source::measured, what};
            else
                l.total = MemoryFigure{d.vulkan_heap->bytes, Source::measured, what};
        }
        if (d.vulkan_max_allocation) l.largest_allocation = *d.vulkan_max_allocation;
    } else {
        l.advice = d.advice;  // about ROCm's GTT ceiling; a Vulkan engine allocates from the carve-out
    }
    return l;
}

engines::Placement placement_of(const DeviceSnapshot& d, const std::string& backend) {
    // A Vulkan engine numbers devices as libvulkan does (GGML_VK_VISIBLE_DEVICES), not as CUDA or HIP.
    const auto ordinal = backend == "vulkan" ? d.vulkan_index : d.ordinal;
    engines::Placement p{d.id, backend, ordinal, d.total.bytes, d.unified, {}, {}};
    if (backend == "vulkan" && d.vulkan_max_allocation) p.largest_allocation = d.vulkan_max_allocation->bytes;
    return p;
}

std::string backend_of(const DeviceSnapshot& d, const config::Config& cfg) {
    return cfg.backend_for(d.id, d.backends.empty() ? std::vector<std::string>{d.backend} : d.backends);
}

}  // namespace loch::broker
