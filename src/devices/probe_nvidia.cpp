// NVIDIA GPUs through NVML, loaded with dlopen: no link-time dependency on the driver, and no CUDA context
// is ever created (NVML reads the driver's bookkeeping; it does not allocate on the GPU).
#include <dlfcn.h>

#include <fmt/format.h>

#include <memory>

#include "devices/nvml_abi.hpp"
#include "devices/probe.hpp"
#include "devices/shared_library.hpp"

namespace loch::devices {

namespace {

// nvmlShutdown on every path out once nvmlInit succeeded.
struct Session {
    nvml::ShutdownFn shutdown = nullptr;
    ~Session() {
        if (shutdown) shutdown();
    }
};

}  // namespace

NvmlProbe probe_nvidia(const std::string& library, const Sysroot& root) {
    NvmlProbe out;
    dlerror();
    SharedLibrary lib(dlopen(library.c_str(), RTLD_NOW | RTLD_LOCAL));
    if (!lib) {
        const char* err = dlerror();
        out.note = fmt::format("NVML not probed: dlopen {} failed: {}", library, err ? err : "unknown error");
        return out;
    }
    auto init = library_symbol<nvml::InitFn>(lib.get(), "nvmlInit_v2");
    auto shutdown = library_symbol<nvml::ShutdownFn>(lib.get(), "nvmlShutdown");
    auto error_string = library_symbol<nvml::ErrorStringFn>(lib.get(), "nvmlErrorString");
    auto get_count = library_symbol<nvml::GetCountFn>(lib.get(), "nvmlDeviceGetCount_v2");
    auto get_handle = library_symbol<nvml::GetHandleFn>(lib.get(), "nvmlDeviceGetHandleByIndex_v2");
    auto get_name = library_symbol<nvml::GetNameFn>(lib.get(), "nvmlDeviceGetName");
    auto get_memory = library_symbol<nvml::GetMemoryFn>(lib.get(), "nvmlDeviceGetMemoryInfo");
    auto get_memory_v2 = library_symbol<nvml::GetMemoryV2Fn>(lib.get(), "nvmlDeviceGetMemoryInfo_v2");
    auto get_procs =
        library_symbol<nvml::GetProcessesFn>(lib.get(), "nvmlDeviceGetComputeRunningProcesses_v3");
    const char* procs_symbol = "nvmlDeviceGetComputeRunningProcesses_v3";
    if (!get_procs) {
        get_procs =
            library_symbol<nvml::GetProcessesFn>(lib.get(), "nvmlDeviceGetComputeRunningProcesses_v2");
        procs_symbol = "nvmlDeviceGetComputeRunningProcesses_v2";
    }
    auto get_procs_v1 =
        library_symbol<nvml::GetProcessesV1Fn>(lib.get(), "nvmlDeviceGetComputeRunningProcesses");
    auto driver_version = library_symbol<nvml::DriverVersionFn>(lib.get(), "nvmlSystemGetDriverVersion");
    auto capability =
        library_symbol<nvml::ComputeCapabilityFn>(lib.get(), "nvmlDeviceGetCudaComputeCapability");

    if (!init || !shutdown || !get_count || !get_handle || !get_memory) {
        out.note = fmt::format(
            "NVML not probed: {} lacks nvmlInit_v2/nvmlShutdown/nvmlDeviceGetCount_v2/"
            "nvmlDeviceGetHandleByIndex_v2/nvmlDeviceGetMemoryInfo",
            library);
        return out;
    }
    auto why = [&](nvml::nvmlReturn_t rc) {
        const char* s = error_string ? error_string(rc) : nullptr;
        return fmt::format("NVML error {} ({})", rc, s ? s : "no nvmlErrorString");
    };
    if (auto rc = init(); rc != nvml::NVML_SUCCESS) {
        out.note = fmt::format("NVML not probed: nvmlInit_v2 failed: {}", why(rc));
        return out;
    }
    Session session{shutdown};

    Probed<std::string> driver = Probed<std::string>::unknown("nvmlSystemGetDriverVersion missing");
    if (driver_version) {
        char buf[nvml::NVML_SYSTEM_DRIVER_VERSION_BUFFER_SIZE] = {};
        if (auto rc = driver_version(buf, sizeof buf); rc == nvml::NVML_SUCCESS)
            driver =
                Probed<std::string>::known(std::string("NVIDIA ") + buf, "NVML nvmlSystemGetDriverVersion");
        else
            driver = Probed<std::string>::unknown("nvmlSystemGetDriverVersion: " + why(rc));
    }

    unsigned count = 0;
    if (auto rc = get_count(&count); rc != nvml::NVML_SUCCESS) {
        out.note = "NVML: nvmlDeviceGetCount_v2 failed: " + why(rc);
        return out;
    }
    for (unsigned i = 0; i < count; ++i) {
        Device d;
        d.id = fmt::format("nvidia:{}", i);
        d.ordinal = static_cast<int>(i);
        d.vendor = Vendor::nvidia;
        d.kind = DeviceKind::discrete;
        d.kind_reason = "NVIDIA GPU with dedicated memory (NVML)";
        d.driver_version = driver;
        d.firmware_version = Probed<std::string>::unknown("not probed on NVIDIA");
        d.vulkan_device_local_heap = ProbedFigure::unknown("Vulkan not probed");
        d.vulkan_max_allocation = ProbedFigure::unknown("Vulkan not probed");
        nvml::nvmlDevice_t h = nullptr;
        if (auto rc = get_handle(i, &h); rc != nvml::NVML_SUCCESS) {
            d.name = "NVIDIA GPU";
            const auto reason = fmt::format("nvmlDeviceGetHandleByIndex_v2({}): {}", i, why(rc));
            d.pools.push_back({PoolKind::vram, ProbedFigure::unknown(reason), ProbedFigure::unknown(reason),
                               ProbedFigure::unknown(reason)});
            d.compute = Probed<std::string>::unknown(reason);
            out.devices.push_back(std::move(d));
            continue;
        }
        char name[nvml::NVML_DEVICE_NAME_BUFFER_SIZE] = {};
        d.name = get_name && get_name(h, name, sizeof name) == nvml::NVML_SUCCESS ? name : "NVIDIA GPU";

        MemoryPool vram;
        vram.kind = PoolKind::vram;
        nvml::nvmlMemory_t mem{};
        nvml::nvmlMemory_v2_t mem2{};
        mem2.version = nvml::nvmlMemory_v2;
        // A figure named by the NVML call and field it came from.
        const auto fig = [&](const char* call, unsigned long long v, const char* field) {
            const std::string detail = fmt::format("NVML {}({}).{}", call, i, field);
            return ProbedFigure::known({v, Source::measured, detail}, detail);
        };
        if (get_memory_v2 && get_memory_v2(h, &mem2) == nvml::NVML_SUCCESS) {
            // v2: the driver's reservation apart; used + reserved + free = total.
            const char* call = "nvmlDeviceGetMemoryInfo_v2";
            vram.total = fig(call, mem2.total, "total");
            vram.used = fig(call, mem2.used, "used");
            vram.free = fig(call, mem2.free, "free");
            vram.reserved = fig(call, mem2.reserved, "reserved");
        } else if (auto rc = get_memory(h, &mem); rc == nvml::NVML_SUCCESS) {
            const char* call = "nvmlDeviceGetMemoryInfo";
            vram.total = fig(call, mem.total, "total");
            vram.used = fig(call, mem.used, "used");
            vram.free = fig(call, mem.free, "free");
            vram.reserved = ProbedFigure::unknown("NVML v1 (no nvmlDeviceGetMemoryInfo_v2): counted in used");
        } else {
            const auto reason = "nvmlDeviceGetMemoryInfo: " + why(rc);
            vram.total = vram.used = vram.free = ProbedFigure::unknown(reason);
        }
        d.pools.push_back(std::move(vram));

        int major = 0, minor = 0;
        if (capability && capability(h, &major, &minor) == nvml::NVML_SUCCESS)
            d.compute = Probed<std::string>::known(fmt::format("{}.{}", major, minor),
                                                   "NVML nvmlDeviceGetCudaComputeCapability");
        else
            d.compute = Probed<std::string>::unknown("nvmlDeviceGetCudaComputeCapability failed or missing");

        // Per-process usage: start with room for 64 processes, grow once if NVML says it needs more.
        std::vector<std::pair<unsigned, unsigned long long>> procs;
        std::string procs_from;
        nvml::nvmlReturn_t rc = -1;
        if (get_procs) {
            std::vector<nvml::nvmlProcessInfo_t> infos(64);
            unsigned n = static_cast<unsigned>(infos.size());
            rc = get_procs(h, &n, infos.data());
            if (rc == nvml::NVML_ERROR_INSUFFICIENT_SIZE) {
                infos.resize(n + 16);
                n = static_cast<unsigned>(infos.size());
                rc = get_procs(h, &n, infos.data());
            }
            if (rc == nvml::NVML_SUCCESS)
                for (unsigned k = 0; k < n && k < infos.size(); ++k)
                    procs.emplace_back(infos[k].pid, infos[k].usedGpuMemory);
            procs_from = procs_symbol;
        } else if (get_procs_v1) {
            std::vector<nvml::nvmlProcessInfo_v1_t> infos(64);
            unsigned n = static_cast<unsigned>(infos.size());
            rc = get_procs_v1(h, &n, infos.data());
            if (rc == nvml::NVML_ERROR_INSUFFICIENT_SIZE) {
                infos.resize(n + 16);
                n = static_cast<unsigned>(infos.size());
                rc = get_procs_v1(h, &n, infos.data());
            }
            if (rc == nvml::NVML_SUCCESS)
                for (unsigned k = 0; k < n && k < infos.size(); ++k)
                    procs.emplace_back(infos[k].pid, infos[k].usedGpuMemory);
            procs_from = "nvmlDeviceGetComputeRunningProcesses";
        }
        if (procs_from.empty()) {
            d.processes_note = "NVML has no nvmlDeviceGetComputeRunningProcesses";
        } else if (rc != nvml::NVML_SUCCESS) {
            d.processes_note = procs_from + ": " + why(rc);
        } else {
            d.processes_note = fmt::format("NVML {} ({} processes)", procs_from, procs.size());
            int unavailable = 0;
            for (const auto& [pid, used] : procs) {
                if (used == nvml::NVML_VALUE_NOT_AVAILABLE) {
                    ++unavailable;  // e.g. a process in another container: NVML withholds its usage
                    continue;
                }
                d.processes.push_back(
                    {static_cast<int>(pid),
                     process_command(root, static_cast<int>(pid)),
                     PoolKind::vram,
                     {used, Source::measured, fmt::format("NVML {} pid {}", procs_from, pid)}});
            }
            if (unavailable > 0)
                d.processes_note += fmt::format(
                    "; {} processes without a memory figure (NVML_VALUE_NOT_AVAILABLE)", unavailable);
        }
        out.devices.push_back(std::move(d));
    }
    return out;
}

}  // namespace loch::devices
