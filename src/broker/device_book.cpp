// broker/device_book — see device_book.hpp.
#include "broker/device_book.hpp"

#include "broker/footprint.hpp"

namespace loch::broker {

engines::Placement DeviceBook::placement_of(const std::string& device) const {
    if (const auto* p = probed_placement(device)) return *p;
    return placement_without_probe(device);
}

const engines::Placement* DeviceBook::probed_placement(const std::string& device) const {
    const auto it = placements_.find(device);
    return it != placements_.end() ? &it->second : nullptr;
}

std::string DeviceBook::driver_of(const std::string& device) const {
    const auto it = drivers_.find(device);
    return it != drivers_.end() ? it->second : std::string();
}

void DeviceBook::unlock(const std::string& device, const std::string& model) {
    if (const auto it = locks_.find(device); it != locks_.end() && it->second == model) locks_.erase(it);
}

std::optional<std::string> DeviceBook::holder(const std::string& device) const {
    const auto it = locks_.find(device);
    if (it == locks_.end()) return std::nullopt;
    return it->second;
}

}  // namespace loch::broker
