#include "devices/usable.hpp"

#include <fmt/format.h>

#include <algorithm>

namespace loch::devices {

namespace {

constexpr std::uint64_t kTtmPageSize = 4096;  // ttm.pages_limit counts 4 KiB pages on x86_64

// cgroup headroom: memory.max - memory.current, or nothing when there is no limit. Unknown current with a
// known limit counts the whole limit as headroom (documented: the limit is the hard bound).
std::optional<BudgetTerm> cgroup_term(const SystemInfo& s) {
    if (!s.cgroup_max) return std::nullopt;
    const auto max = s.cgroup_max->bytes;
    if (!s.cgroup_current)
        return BudgetTerm{"cgroup limit",
                          {max, Source::measured, s.cgroup_max->detail + " (memory.current unknown)"}};
    const auto cur = s.cgroup_current->bytes;
    return BudgetTerm{"cgroup headroom",
                      {cur < max ? max - cur : 0, Source::measured,
                       fmt::format("{} - {}", s.cgroup_max->detail, s.cgroup_current->detail)}};
}

UsableBudget take_min(UsableBudget b) {
    auto it = std::min_element(b.terms.begin(), b.terms.end(), [](const BudgetTerm& x, const BudgetTerm& y) {
        return x.bytes.bytes < y.bytes.bytes;
    });
    b.binding = it->name;
    std::string detail = "min(";
    for (std::size_t i = 0; i < b.terms.size(); ++i)
        detail += fmt::format("{}{} {}", i ? ", " : "", b.terms[i].name, human_bytes(b.terms[i].bytes.bytes));
    detail += ") = " + it->name;
    b.budget = ProbedFigure::known({it->bytes.bytes, Source::measured, detail}, detail);
    return b;
}

}  // namespace

UsableBudget usable_budget(const Device& d, const SystemInfo& s) {
    UsableBudget b;
    if (d.vendor == Vendor::vulkan) {  // a GPU only Vulkan reports: its heap, with no use reported
        b.rule = "GPU only Vulkan reports: its DEVICE_LOCAL heap (Vulkan 1.0 reports no use)";
        if (!d.vulkan_device_local_heap) {
            b.budget = ProbedFigure::unknown("no Vulkan heap: " + d.vulkan_device_local_heap.detail);
            return b;
        }
        b.terms.push_back({"Vulkan heap", *d.vulkan_device_local_heap.value});
        return take_min(std::move(b));
    }
    switch (d.kind) {
        case DeviceKind::discrete: {
            b.rule = "discrete GPU: VRAM free";
            const auto* vram = d.pool(PoolKind::vram);
            if (!vram || !vram->free) {
                b.budget = ProbedFigure::unknown("VRAM free unknown: " +
                                                 (vram ? vram->free.detail : "no VRAM pool"));
                return b;
            }
            b.terms.push_back({"VRAM free", *vram->free.value});
            return take_min(std::move(b));
        }
        case DeviceKind::integrated: {
            b.rule =
                "integrated GPU (unified memory): min(GTT headroom, MemAvailable, cgroup headroom); "
                "GTT headroom = min(GTT total, ttm.pages_limit x 4 KiB) - GTT used";
            const auto* gtt = d.pool(PoolKind::gtt);
            if (!gtt || !gtt->total || !gtt->used) {
                b.budget = ProbedFigure::unknown("GTT unknown: " + (!gtt          ? std::string("no GTT pool")
                                                                    : !gtt->total ? gtt->total.detail
                                                                                  : gtt->used.detail));
                return b;
            }
            std::uint64_t ceiling = gtt->total->bytes;
            std::string ceiling_detail = gtt->total->detail;
            if (s.ttm_pages_limit && *s.ttm_pages_limit.value * kTtmPageSize < ceiling) {
                ceiling = *s.ttm_pages_limit.value * kTtmPageSize;
                ceiling_detail = s.ttm_pages_limit.detail + " x 4 KiB";
            }
            const auto used = gtt->used->bytes;
            b.terms.push_back({"GTT headroom",
                               {ceiling > used ? ceiling - used : 0, Source::measured,
                                fmt::format("{} - {}", ceiling_detail, gtt->used->detail)}});
            break;
        }
        case DeviceKind::cpu:
            b.rule = "CPU: min(MemAvailable, cgroup headroom)";
            break;
    }
    if (!s.mem_available) {
        b.budget = ProbedFigure::unknown("MemAvailable unknown: " + s.mem_available.detail);
        return b;
    }
    b.terms.push_back({"MemAvailable", *s.mem_available.value});
    if (auto c = cgroup_term(s)) b.terms.push_back(*c);
    return take_min(std::move(b));
}

const Device* roomiest_device(const DeviceReport& report) {
    const Device* best = nullptr;
    for (const auto& d : report.devices)
        if (d.usable.budget && (!best || d.usable.budget->bytes > best->usable.budget->bytes)) best = &d;
    return best;
}

}  // namespace loch::devices
