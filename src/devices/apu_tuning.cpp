#include "devices/apu_tuning.hpp"

#include <fmt/format.h>

namespace loch::devices {

namespace {
constexpr std::uint64_t kPage = 4096;
}

std::optional<GttCeiling> gtt_ceiling_below_carve_out(const Device& d, const SystemInfo& s) {
    if (d.vendor != Vendor::amd || d.kind != DeviceKind::integrated) return std::nullopt;
    const auto* vram = d.pool(PoolKind::vram);
    const auto* gtt = d.pool(PoolKind::gtt);
    if (!vram || !gtt || !vram->total || !gtt->total) return std::nullopt;
    GttCeiling g;
    g.ceiling = gtt->total->bytes;
    g.ceiling_from = "amdgpu.gttsize (mem_info_gtt_total)";
    if (s.ttm_pages_limit && *s.ttm_pages_limit.value * kPage < g.ceiling) {
        g.ceiling = *s.ttm_pages_limit.value * kPage;
        g.ceiling_from = "ttm.pages_limit";
    }
    g.carve_out = vram->total->bytes;
    if (g.carve_out <= g.ceiling) return std::nullopt;
    if (s.mem_total) {
        // Physical RAM = what the OS sees + the carve-out, rounded up to a GiB; leave 4 GiB to the OS.
        const std::uint64_t physical = (s.mem_total->bytes + g.carve_out + kGiB - 1) / kGiB * kGiB;
        g.physical = physical;
        g.target = physical > 8 * kGiB ? physical - 4 * kGiB : physical / 2;
        g.kernel_parameters = fmt::format("amd_iommu=off amdgpu.gttsize={} ttm.pages_limit={}",
                                          *g.target / kMiB, *g.target / kPage);
    }
    return g;
}

std::string GttCeiling::fix() const {
    if (!target)
        return "In the BIOS set the UMA frame buffer (carve-out) to 512 MB and raise GTT with the kernel "
               "parameters `amd_iommu=off amdgpu.gttsize=<MiB> ttm.pages_limit=<4 KiB pages>` (RAM minus ~4 "
               "GiB).";
    return fmt::format(
        "In the BIOS set the UMA frame buffer (carve-out) to its minimum (512 MB), then boot with the kernel "
        "parameters `{}` (add them to GRUB_CMDLINE_LINUX in /etc/default/grub, run update-grub, reboot). GTT "
        "then covers about {} of the {} machine.",
        kernel_parameters, human_bytes(*target), human_bytes(*physical));
}

}  // namespace loch::devices
