#include "broker/footprint.hpp"

#include <cctype>

namespace loch::broker {

engines::Placement placement_without_probe(const std::string& device) {
    engines::Placement p;
    p.device = device;
    if (device == "cpu") return p;
    const auto number = [&](std::string_view prefix) -> std::optional<int> {
        const std::string_view rest = std::string_view(device).substr(prefix.size());
        if (rest.empty() || !std::all_of(rest.begin(), rest.end(),
                                         [](char c) { return std::isdigit(static_cast<unsigned char>(c)); }))
            return std::nullopt;
        return std::stoi(std::string(rest));
    };
    for (const auto& [prefix, backend] : {std::pair<std::string_view, std::string_view>{"nvidia:", "cuda"},
                                          {"cuda", "cuda"},
                                          {"rocm", "rocm"},
                                          {"amd:", "rocm"},
                                          {"vulkan", "vulkan"}}) {
        if (!device.starts_with(prefix)) continue;
        p.backend = std::string(backend);
        if (prefix != "amd:") p.ordinal = number(prefix);  // "amd:card1" says nothing about the HIP ordinal
        return p;
    }
    p.backend = "cuda";
    return p;
}

}  // namespace loch::broker
