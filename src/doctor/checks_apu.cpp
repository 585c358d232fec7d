// Checks about AMD GPUs and APUs: GTT vs carve-out, unified memory, firmware, gfx override, Vulkan heaps.
#include <fmt/format.h>

#include <algorithm>
#include <cstdio>
#include <map>

#include "devices/apu_tuning.hpp"
#include "doctor/checks.hpp"

namespace loch::doctor::checks {

using devices::Device;
using devices::DeviceKind;
using devices::PoolKind;
using devices::Vendor;

namespace {

constexpr std::uint64_t kPage = 4096;

bool is_apu(const Device& d) {
    return d.vendor == Vendor::amd && d.kind == DeviceKind::integrated;
}

std::string gfx(const Device& d) {
    return d.compute ? *d.compute.value : std::string();
}

std::optional<std::string> env_value(const devices::SystemInfo& s, const std::string& key) {
    auto it = s.env.find(key);
    if (it == s.env.end()) return std::nullopt;
    return it->second;
}

// "11.0.0" → "gfx1100", "10.3.0" → "gfx1030", "9.0.0" → "gfx900".
std::string override_target(const std::string& version) {
    unsigned major = 0, minor = 0, step = 0;
    if (std::sscanf(version.c_str(), "%u.%u.%u", &major, &minor, &step) != 3) return version;
    return fmt::format("gfx{}{:x}{:x}", major, minor, step);
}

std::string env_from(const devices::SystemInfo& s) {
    return s.env_source.empty() ? std::string("environment") : "environment (" + s.env_source + ")";
}

}  // namespace

std::string bytes_text(std::uint64_t b) {
    return fmt::format("{} ({} B)", human_bytes(b), b);
}

Evidence figure_evidence(std::string what, const MemoryFigure& f) {
    return {std::move(what), bytes_text(f.bytes), f.detail, f.bytes};
}

Evidence figure_evidence(std::string what, const devices::ProbedFigure& f) {
    if (!f) return {std::move(what), "unknown", f.detail};
    return figure_evidence(std::move(what), *f.value);
}

const ModelDemand* largest_model(const Input& in) {
    const ModelDemand* best = nullptr;
    for (const auto& m : in.models)
        if (!best || m.bytes.bytes > best->bytes.bytes) best = &m;
    return best;
}

void apu_gtt_ceiling(const DeviceReport& r, const Input&, Findings& out) {
    const auto& s = r.system;
    for (const auto& d : r.devices) {
        const auto g = devices::gtt_ceiling_below_carve_out(d, s);
        if (!g) continue;
        Finding f;
        f.id = "apu-gtt-ceiling";
        f.severity = Severity::warning;
        f.device = d.id;
        f.evidence.push_back(figure_evidence("VRAM (BIOS carve-out) total", d.pool(PoolKind::vram)->total));
        f.evidence.push_back(figure_evidence("GTT total", d.pool(PoolKind::gtt)->total));
        if (s.ttm_pages_limit)
            f.evidence.push_back({"ttm.pages_limit",
                                  fmt::format("{} pages = {}", *s.ttm_pages_limit.value,
                                              bytes_text(*s.ttm_pages_limit.value * kPage)),
                                  s.ttm_pages_limit.detail});
        if (s.amdgpu_gttsize_mib)
            f.evidence.push_back({"amdgpu.gttsize",
                                  fmt::format("{} MiB{}", *s.amdgpu_gttsize_mib.value,
                                              *s.amdgpu_gttsize_mib.value < 0 ? " (driver default)" : ""),
                                  s.amdgpu_gttsize_mib.detail});
        if (s.iommu_enabled)
            f.evidence.push_back({"IOMMU", *s.iommu_enabled.value ? "on" : "off", s.iommu_enabled.detail});
        f.evidence.push_back(figure_evidence("MemTotal (RAM the OS sees)", s.mem_total));
        f.explanation = fmt::format(
            "The BIOS reserves {} as \"VRAM\" carve-out, but on this APU ROCm/HIP allocations (hipMalloc) "
            "come from the GTT pool, which is capped at {} by {}{}. Tools that read the carve-out (rocm-smi, "
            "engines that size themselves by VRAM) see memory that models cannot actually use, and the "
            "carve-out is RAM the OS has lost. Models larger than the GTT ceiling fail to load.",
            human_bytes(g->carve_out), human_bytes(g->ceiling), g->ceiling_from,
            s.iommu_enabled && *s.iommu_enabled.value
                ? "; with the IOMMU on, GTT is also bounded by the RAM the CPU sees"
                : "");
        f.fix = g->fix();
        out.push_back(std::move(f));
    }
}

void unified_memory_env(const DeviceReport& r, const Input&, Findings& out) {
    const auto& s = r.system;
    const auto value = env_value(s, "GGML_CUDA_ENABLE_UNIFIED_MEMORY");
    if (!value) return;
    const Evidence env_evidence{"GGML_CUDA_ENABLE_UNIFIED_MEMORY", "\"" + *value + "\"", env_from(s)};
    const auto override_gfx = env_value(s, "HSA_OVERRIDE_GFX_VERSION");
    bool any_apu = false;
    for (const auto& d : r.devices) {
        if (!is_apu(d)) continue;
        any_apu = true;
        Finding f;
        f.id = "unified-memory-env";
        f.severity = Severity::error;
        f.device = d.id;
        f.evidence.push_back(env_evidence);
        f.evidence.push_back({"GPU", d.name + (d.compute ? " " + *d.compute.value : ""), d.kind_reason});
        if (override_gfx) f.evidence.push_back({"HSA_OVERRIDE_GFX_VERSION", *override_gfx, env_from(s)});
        if (s.cgroup_max) f.evidence.push_back(figure_evidence("cgroup memory limit", s.cgroup_max));
        f.explanation = fmt::format(
            "ggml enables unified memory whenever this variable exists (even \"0\"): it allocates with "
            "hipMallocManaged and advises hipMemAdviseSetCoarseGrain. On this APU{} the advice succeeds, the "
            "memory "
            "becomes inaccessible to the CPU, and the engine dies with SIGSEGV (exit 139) tens of seconds "
            "into a "
            "job. Managed memory is also charged to the process's memory cgroup{}, so a container limit "
            "kills the "
            "engine.",
            override_gfx
                ? " (reported as " + override_target(*override_gfx) + " because of HSA_OVERRIDE_GFX_VERSION)"
                : "",
            s.cgroup_max ? " (limit " + human_bytes(s.cgroup_max->bytes) + ")" : "");
        f.fix =
            "Remove GGML_CUDA_ENABLE_UNIFIED_MEMORY from the environment (shell profile, systemd unit, "
            "container "
            "env, loch engine env). On an APU the GPU already uses system RAM through GTT: raise GTT instead "
            "(see apu-gtt-ceiling).";
        out.push_back(std::move(f));
    }
    if (any_apu || !s.cgroup_max) return;
    const bool any_gpu = std::any_of(r.devices.begin(), r.devices.end(),
                                     [](const Device& d) { return d.kind != DeviceKind::cpu; });
    if (!any_gpu) return;
    Finding f;
    f.id = "unified-memory-env";
    f.severity = Severity::warning;
    f.evidence.push_back(env_evidence);
    f.evidence.push_back(figure_evidence("cgroup memory limit", s.cgroup_max));
    f.explanation = fmt::format(
        "With unified memory, model buffers are managed allocations charged to this process's memory cgroup "
        "(limit {}): a model that fits the GPU can still be OOM-killed by the container limit.",
        human_bytes(s.cgroup_max->bytes));
    f.fix =
        "Unset GGML_CUDA_ENABLE_UNIFIED_MEMORY unless you need to oversubscribe VRAM, or raise the container "
        "memory limit above the largest model plus its context.";
    out.push_back(std::move(f));
}

void linux_firmware_broken(const DeviceReport& r, const Input&, Findings& out) {
    const auto& fw = r.system.linux_firmware;
    for (const auto& d : r.devices) {
        if (d.vendor != Vendor::amd || gfx(d) != "gfx1151") continue;
        if (fw && *fw.value != "20251125") continue;
        Finding f;
        f.id = "linux-firmware-broken";
        f.device = d.id;
        f.evidence.push_back({"GPU target", gfx(d), d.compute.detail});
        if (fw) {
            f.severity = Severity::error;
            f.evidence.push_back({"linux-firmware", *fw.value, fw.detail});
            f.explanation =
                "linux-firmware 20251125 breaks ROCm on Strix Halo (gfx1151): GPU jobs hang or fail to "
                "initialise. 20260110 and later are fine.";
        } else {
            f.severity = Severity::info;
            f.evidence.push_back({"linux-firmware", "unknown", fw.detail});
            f.explanation =
                "The linux-firmware version could not be read. Version 20251125 breaks ROCm on Strix Halo "
                "(gfx1151); 20260110 and later are fine.";
        }
        f.fix =
            "Upgrade linux-firmware to 20260110 or later (apt/dnf/pacman upgrade linux-firmware), regenerate "
            "the "
            "initramfs (update-initramfs -u / dracut -f / mkinitcpio -P) and reboot.";
        out.push_back(std::move(f));
    }
}

void hsa_override_gfx(const DeviceReport& r, const Input&, Findings& out) {
    // Targets that official ROCm builds of common software (PyTorch wheels) lack kernels for, and the
    // override that maps them to a supported ISA of the same family.
    static const std::map<std::string, std::string> needs = {
        {"gfx1151", "11.0.0"}, {"gfx1150", "11.0.0"}, {"gfx1103", "11.0.0"},
        {"gfx1031", "10.3.0"}, {"gfx1032", "10.3.0"}, {"gfx1034", "10.3.0"},
        {"gfx1035", "10.3.0"}, {"gfx1036", "10.3.0"}, {"gfx90c", "9.0.0"},
    };
    if (env_value(r.system, "HSA_OVERRIDE_GFX_VERSION")) return;
    for (const auto& d : r.devices) {
        if (d.vendor != Vendor::amd) continue;
        auto it = needs.find(gfx(d));
        if (it == needs.end()) continue;
        Finding f;
        f.id = "hsa-override-gfx";
        f.severity = Severity::info;
        f.device = d.id;
        f.evidence.push_back({"GPU target", gfx(d), d.compute.detail});
        f.evidence.push_back({"HSA_OVERRIDE_GFX_VERSION", "not set", env_from(r.system)});
        f.explanation = fmt::format(
            "{} has no kernels in many ROCm builds (most PyTorch wheels): they fail with \"invalid device "
            "function\" "
            "or \"no kernel image\" unless the runtime is told to treat the GPU as {}. llama.cpp built for "
            "{} does "
            "not need it.",
            gfx(d), override_target(it->second), gfx(d));
        f.fix = fmt::format(
            "For engines built without {} kernels, set HSA_OVERRIDE_GFX_VERSION={} in that engine's "
            "environment only (never together with GGML_CUDA_ENABLE_UNIFIED_MEMORY).",
            gfx(d), it->second);
        out.push_back(std::move(f));
    }
}

void vulkan_heap_too_small(const DeviceReport& r, const Input& in, Findings& out) {
    if (std::find(in.engines.begin(), in.engines.end(), "vulkan") == in.engines.end()) return;
    const auto* model = largest_model(in);
    for (const auto& d : r.devices) {
        if (!is_apu(d)) continue;
        const auto& heap = d.vulkan_device_local_heap;
        Finding f;
        f.id = "vulkan-heap-too-small";
        f.device = d.id;
        f.evidence.push_back(figure_evidence("Vulkan DEVICE_LOCAL heap", heap));
        f.fix =
            "Run this device with the ROCm/HIP build of the engine, which allocates from GTT, and keep "
            "Vulkan "
            "engines for models that fit the heap. Mesa RADV sizes the device-local heap from the carve-out, "
            "so only a larger BIOS UMA frame buffer raises it (which takes RAM from the OS and GTT).";
        if (!heap) {
            f.severity = Severity::info;
            f.explanation =
                "A Vulkan engine is configured on this APU, but its heap could not be read (" + heap.detail +
                "). On an APU Mesa RADV reports 2/3 of GTT + carve-out as device-local and lets one buffer "
                "be at most 4 GiB, so Vulkan jobs fail at sizes the GPU's GTT could hold.";
            out.push_back(std::move(f));
            continue;
        }
        // One buffer's limit: an image's largest tensor (Flux's decoder im2col at 1024²: 4.5 GiB) fails
        // above it however large the heap.
        const auto& most = d.vulkan_max_allocation;
        if (most && most->bytes < 8 * kGiB && !(model && model->bytes.bytes > heap->bytes)) {
            Finding a = f;
            a.severity = Severity::warning;
            a.evidence.push_back(figure_evidence("Vulkan largest single allocation", most));
            a.explanation = fmt::format(
                "A Vulkan engine on this APU can allocate at most {} in one buffer "
                "(maxMemoryAllocationSize), "
                "however large its {} heap: a tensor above it fails. Image models hit it first — the "
                "decoder's im2col at 1024x1024 is 4.5 GiB — and loch refuses such requests up front.",
                human_bytes(most->bytes), human_bytes(heap->bytes));
            a.fix =
                "Run image models with the ROCm/HIP build on this device (devices.<id>.backend: rocm), or "
                "keep "
                "their tensors small: sd.vae_conv_direct or sd.vae_tiling for the decoder, sd.diffusion_fa "
                "for the attention scores.";
            out.push_back(std::move(a));
            continue;
        }
        if (model && model->bytes.bytes > heap->bytes) {
            f.severity = Severity::error;
            f.evidence.push_back(figure_evidence("model " + model->name, model->bytes));
            f.explanation = fmt::format(
                "A Vulkan engine on this APU can allocate at most {} (its DEVICE_LOCAL heap), "
                "but {} needs {}: it fails to load even though the GPU's usable budget is {}.",
                human_bytes(heap->bytes), model->name, human_bytes(model->bytes.bytes),
                d.usable.budget ? human_bytes(d.usable.budget->bytes) : "unknown");
            out.push_back(std::move(f));
        } else if (!model && d.usable.budget && heap->bytes < d.usable.budget->bytes / 2) {
            f.severity = Severity::warning;
            f.evidence.push_back(figure_evidence("usable budget", d.usable.budget));
            f.explanation = fmt::format(
                "A Vulkan engine on this APU sees a {} heap, less than half of the {} the "
                "device can really use: larger models and images (1024x1024) fail.",
                human_bytes(heap->bytes), human_bytes(d.usable.budget->bytes));
            out.push_back(std::move(f));
        }
    }
}

}  // namespace loch::doctor::checks
