// `loch devices [--json] [--sysroot DIR]`: what each device really has, every figure with its source.
#include <fmt/format.h>

#include <iostream>
#include <string>

#include "cli/commands.hpp"
#include "devices/probe.hpp"
#include "devices/report_json.hpp"

namespace loch::cli {

namespace {

std::string figure(const devices::ProbedFigure& f) {
    if (!f) return "unknown (" + f.detail + ")";
    return fmt::format("{} ({} B, {})", human_bytes(f->bytes), f->bytes, f->detail);
}

template <class T>
std::string value(const devices::Probed<T>& p) {
    if (!p) return "unknown (" + p.detail + ")";
    return fmt::format("{} ({})", *p.value, p.detail);
}

std::string pool_label(const devices::Device& d, devices::PoolKind k) {
    using devices::PoolKind;
    if (d.kind == devices::DeviceKind::integrated && k == PoolKind::vram) return "VRAM (BIOS carve-out)";
    switch (k) {
        case PoolKind::vram:
            return "VRAM";
        case PoolKind::vis_vram:
            return "CPU-visible VRAM";
        case PoolKind::gtt:
            return "GTT (shared system RAM)";
        case PoolKind::host_ram:
            return "host RAM";
    }
    return "?";
}

void print_text(const devices::DeviceReport& r) {
    for (const auto& d : r.devices) {
        fmt::print("{}  {}  [{}]\n", d.id, d.name, devices::to_string(d.kind));
        fmt::print("  kind:      {}\n", d.kind_reason);
        if (!d.pci_slot.empty()) fmt::print("  pci:       {} {}\n", d.pci_slot, d.pci_device_id);
        if (d.vendor != devices::Vendor::cpu) fmt::print("  compute:   {}\n", value(d.compute));
        fmt::print("  driver:    {}\n", value(d.driver_version));
        if (d.vendor != devices::Vendor::cpu) fmt::print("  firmware:  {}\n", value(d.firmware_version));
        for (const auto& p : d.pools) {
            fmt::print("  {}:\n", pool_label(d, p.kind));
            fmt::print("    total {}\n    used  {}\n    free  {}\n", figure(p.total), figure(p.used),
                       figure(p.free));
            if (p.reserved) fmt::print("    reserved by the driver {}\n", figure(p.reserved));
        }
        if (d.vendor == devices::Vendor::amd) {
            fmt::print("  Vulkan device-local heap: {}\n", figure(d.vulkan_device_local_heap));
            fmt::print("  Vulkan largest allocation: {}\n", figure(d.vulkan_max_allocation));
        }
        fmt::print("  usable:    {}\n",
                   d.usable.budget
                       ? fmt::format("{} ({} B)", human_bytes(d.usable.budget->bytes), d.usable.budget->bytes)
                       : "unknown (" + d.usable.budget.detail + ")");
        if (d.usable.budget) fmt::print("             {}\n", d.usable.budget->detail);
        fmt::print("             rule: {}\n", d.usable.rule);
        for (const auto& p : d.processes)
            fmt::print("  process:   PID {} holds {} of {} ({}): {}\n", p.pid, human_bytes(p.bytes.bytes),
                       devices::to_string(p.pool), p.bytes.detail, p.command.empty() ? "?" : p.command);
        if (!d.processes_note.empty()) fmt::print("  processes: {}\n", d.processes_note);
        fmt::print("\n");
    }
    const auto& s = r.system;
    fmt::print("system\n");
    fmt::print("  MemTotal:        {}\n", figure(s.mem_total));
    fmt::print("  MemAvailable:    {}\n", figure(s.mem_available));
    fmt::print("  cgroup:          {}\n", value(s.cgroup));
    fmt::print("  cgroup limit:    {}\n", figure(s.cgroup_max));
    fmt::print("  cgroup usage:    {}\n", figure(s.cgroup_current));
    fmt::print("  kernel:          {}\n", value(s.kernel));
    fmt::print("  cmdline:         {}\n", value(s.cmdline));
    fmt::print("  IOMMU enabled:   {}\n", value(s.iommu_enabled));
    fmt::print("  ttm.pages_limit: {}\n", value(s.ttm_pages_limit));
    fmt::print("  amdgpu.gttsize:  {}\n", value(s.amdgpu_gttsize_mib));
    fmt::print("  vm.max_map_count: {}\n", value(s.max_map_count));
    fmt::print("  linux-firmware:  {}\n", value(s.linux_firmware));
    for (const auto& n : r.notes) fmt::print("note: {}\n", n);
}

}  // namespace

void add_devices_command(CLI::App& app) {
    struct Flags {
        bool json = false;
        std::string sysroot = "/";
    };
    auto flags = std::make_shared<Flags>();
    auto* cmd = app.add_subcommand("devices",
                                   "What each device really has: memory pools with their sources, "
                                   "per-process use, and the usable budget loch plans into");
    cmd->add_flag("--json", flags->json, "JSON with exact bytes and the source of every figure");
    cmd->add_option("--sysroot", flags->sysroot, "Read /proc and /sys under DIR (a captured tree)")
        ->check(CLI::ExistingDirectory);
    cmd->callback([flags] {
        const auto options = devices::default_probe_options(flags->sysroot, devices::process_environment());
        const auto report = devices::probe(options);
        if (flags->json)
            std::cout << devices::to_json(report).dump(2) << "\n";
        else
            print_text(report);
    });
}

}  // namespace loch::cli
