#include "cli/config_limits.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cstdlib>
#include <map>

#include "broker/device_source.hpp"
#include "broker/ledger.hpp"
#include "broker/never_fits.hpp"
#include "core/memory.hpp"
#include "engines/kind.hpp"

namespace loch::cli {

bool uses_vulkan(const config::Config& cfg) {
    for (const auto& [id, dc] : cfg.devices)
        if (dc.backend == "vulkan" || id.starts_with("vulkan:")) return true;
    for (const auto& [kind, builds] : cfg.builds)
        for (const auto& b : builds)
            if (b.backend == "vulkan") return true;
    return false;
}

bool names_vulkan_device(const config::Config& cfg) {
    return std::any_of(cfg.devices.begin(), cfg.devices.end(),
                       [](const auto& d) { return d.first.starts_with("vulkan:"); });
}

std::vector<doctor::LimitNeverFits> config_limits(const config::Config& cfg,
                                                  const std::filesystem::path& sysroot) {
    const char* nvml = std::getenv("LOCH_NVML_LIBRARY");
    broker::ProbedDevices probe(nvml && *nvml ? nvml : (sysroot == "/" ? "libnvidia-ml.so.1" : ""), sysroot,
                                uses_vulkan(cfg), names_vulkan_device(cfg));
    broker::Ledger ledger;
    std::map<std::string, engines::Placement> placed;
    std::vector<std::string> known;
    for (const auto& d : probe.snapshot()) {
        known.push_back(d.id);
        const auto backend = broker::backend_of(d, cfg);
        ledger.set_device(broker::limits_of(d, cfg, backend));
        if (d.used) ledger.observe_used(d.id, d.used->bytes);
        placed[d.id] = broker::placement_of(d, backend);
    }
    std::vector<doctor::LimitNeverFits> out;
    for (const auto& m : cfg.models) {
        // As the broker allows them, among the devices probed here.
        auto ids = broker::allowed_devices(cfg, m, known, [&](const std::string& d) {
            const auto it = placed.find(d);
            return it == placed.end() ? std::string() : it->second.backend;
        });
        std::erase_if(ids, [&](const std::string& d) { return !placed.contains(d); });
        std::vector<broker::DeviceRoom> rooms;
        std::vector<std::string> where;
        for (const auto& id : ids) {
            rooms.push_back({placed[id], ledger.capacity(id)});
            where.push_back(fmt::format("{} ({} can ever be free)", id, human_bytes(ledger.capacity(id))));
        }
        auto lines = broker::limits_that_never_fit(engines::kind_of(m), cfg, m, rooms);
        if (!lines.empty())
            out.push_back({m.name, std::move(lines), fmt::format("{}", fmt::join(where, ", "))});
    }
    return out;
}

}  // namespace loch::cli
