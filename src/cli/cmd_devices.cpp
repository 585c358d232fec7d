// `loch devices [--json] [--sysroot DIR]`: what each device really has, every figure with its source.
#include <fmt/format.h>

#include <iostream>

#include <nlohmann/json.hpp>
#include <string>

#include "cli/commands.hpp"
#include "cli/engine_binaries.hpp"
#include "config/config.hpp"
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

void print_engines(const devices::Device& d, const std::vector<doctor::EngineBinary>& builds) {
    const auto e = engines_for(d, builds);
    fmt::print("  engines ({}):\n", e.backend);
    for (const auto& [program, path] : e.programs)
        fmt::print("    {:<15} {}\n", program,
                   !path.empty() ? path
                   : e.backend == "cpu"
                       ? std::string("none found")
                       : "NONE: only builds for other backends; models of it never run here. Fix: "
                         "bash scripts/setup.sh --backend " +
                             e.backend);
}

void print_text(const devices::DeviceReport& r, const std::vector<doctor::EngineBinary>& builds) {
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
        if (d.vendor == devices::Vendor::amd || d.vendor == devices::Vendor::vulkan) {
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
        if (d.software) fmt::print("  software:  used only where the config names it under devices:\n");
        print_engines(d, builds);
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
        std::string engine_dir;
    };
    auto flags = std::make_shared<Flags>();
    auto* cmd = app.add_subcommand("devices",
                                   "What each device really has: memory pools with their sources, "
                                   "per-process use, and the usable budget loch plans into");
    cmd->add_flag("--json", flags->json, "JSON with exact bytes and the source of every figure");
    cmd->add_option("--sysroot", flags->sysroot, "Read /proc and /sys under DIR (a captured tree)")
        ->check(CLI::ExistingDirectory);
    cmd->add_option("--engine-dir", flags->engine_dir,
                    "Where the engine builds are (default: loch's own folder, as `loch serve` looks)")
        ->check(CLI::ExistingDirectory);
    cmd->callback([flags] {
        auto options = devices::default_probe_options(flags->sysroot, devices::process_environment());
        options.software_vulkan = true;  // shown (marked), though loch uses one only where configured
        const auto report = devices::probe(options);
        const auto builds =
            engine_binaries(flags->engine_dir.empty() ? config::LoadContext::from_process().exe_dir
                                                      : std::filesystem::path(flags->engine_dir));
        if (flags->json) {
            auto j = devices::to_json(report);
            for (std::size_t i = 0; i < report.devices.size() && i < j["devices"].size(); ++i) {
                const auto e = engines_for(report.devices[i], builds);
                auto& dj = j["devices"][i];
                dj["engine_backend"] = e.backend;
                for (const auto& [program, path] : e.programs)
                    dj["engines"][program] = path.empty() ? nlohmann::json() : nlohmann::json(path);
            }
            std::cout << j.dump(2) << "\n";
        } else {
            print_text(report, builds);
        }
    });
}

}  // namespace loch::cli
