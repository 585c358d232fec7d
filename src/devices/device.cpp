#include "devices/device.hpp"

namespace loch::devices {

std::string_view to_string(Vendor v) {
    switch (v) {
        case Vendor::nvidia:
            return "nvidia";
        case Vendor::amd:
            return "amd";
        case Vendor::vulkan:
            return "vulkan";
        case Vendor::cpu:
            return "cpu";
    }
    return "unknown";
}

std::vector<std::string> backends_of(const Device& d) {
    switch (d.vendor) {
        case Vendor::nvidia:
            return {"cuda", "vulkan"};
        case Vendor::amd:
            return {"rocm", "vulkan"};
        case Vendor::vulkan:
            return {"vulkan"};
        case Vendor::cpu:
            break;
    }
    return {"cpu"};
}

std::string_view to_string(DeviceKind k) {
    switch (k) {
        case DeviceKind::discrete:
            return "discrete";
        case DeviceKind::integrated:
            return "integrated";
        case DeviceKind::cpu:
            return "cpu";
    }
    return "unknown";
}

std::string_view to_string(PoolKind p) {
    switch (p) {
        case PoolKind::vram:
            return "vram";
        case PoolKind::vis_vram:
            return "vis_vram";
        case PoolKind::gtt:
            return "gtt";
        case PoolKind::host_ram:
            return "host_ram";
    }
    return "unknown";
}

const MemoryPool* Device::pool(PoolKind k) const {
    for (const auto& p : pools)
        if (p.kind == k) return &p;
    return nullptr;
}

const Device* DeviceReport::find(std::string_view id) const {
    for (const auto& d : devices)
        if (d.id == id) return &d;
    return nullptr;
}

}  // namespace loch::devices
