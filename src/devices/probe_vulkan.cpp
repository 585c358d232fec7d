// Vulkan heap sizes, by dlopen of libvulkan.so.1 (no build dependency on the Vulkan SDK). Vulkan engines
// (llama.cpp's Vulkan backend, stable-diffusion.cpp) can only allocate what the driver's DEVICE_LOCAL heap
// offers; on APUs Mesa RADV reports only a few GiB there even when GTT is 100+ GiB.
#include <dlfcn.h>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <memory>

#include "devices/probe.hpp"
#include "devices/shared_library.hpp"

namespace loch::devices {

namespace {

// The few Vulkan 1.0 declarations used, with vulkan_core.h's layouts.
extern "C" {
using VkInstance = struct VkInstance_T*;
using VkPhysicalDevice = struct VkPhysicalDevice_T*;
using VkResult = int;
using PFN_vkVoidFunction = void (*)();
struct VkApplicationInfo {
    int sType;  // VK_STRUCTURE_TYPE_APPLICATION_INFO = 0
    const void* pNext;
    const char* pApplicationName;
    std::uint32_t applicationVersion;
    const char* pEngineName;
    std::uint32_t engineVersion;
    std::uint32_t apiVersion;
};
struct VkInstanceCreateInfo {
    int sType;  // VK_STRUCTURE_TYPE_INSTANCE_CREATE_INFO = 1
    const void* pNext;
    std::uint32_t flags;
    const VkApplicationInfo* pApplicationInfo;
    std::uint32_t enabledLayerCount;
    const char* const* ppEnabledLayerNames;
    std::uint32_t enabledExtensionCount;
    const char* const* ppEnabledExtensionNames;
};
struct VkPhysicalDevicePropertiesPrefix {  // the leading members of VkPhysicalDeviceProperties
    std::uint32_t apiVersion;
    std::uint32_t driverVersion;
    std::uint32_t vendorID;
    std::uint32_t deviceID;
    int deviceType;
    char deviceName[256];
};
struct VkMemoryType {
    std::uint32_t propertyFlags;
    std::uint32_t heapIndex;
};
struct VkMemoryHeap {
    std::uint64_t size;
    std::uint32_t flags;  // VK_MEMORY_HEAP_DEVICE_LOCAL_BIT = 1
};
struct VkPhysicalDeviceMemoryProperties {
    std::uint32_t memoryTypeCount;
    VkMemoryType memoryTypes[32];
    std::uint32_t memoryHeapCount;
    VkMemoryHeap memoryHeaps[16];
};
using PFN_vkGetInstanceProcAddr = PFN_vkVoidFunction (*)(VkInstance, const char*);
using PFN_vkCreateInstance = VkResult (*)(const VkInstanceCreateInfo*, const void*, VkInstance*);
using PFN_vkDestroyInstance = void (*)(VkInstance, const void*);
using PFN_vkEnumeratePhysicalDevices = VkResult (*)(VkInstance, std::uint32_t*, VkPhysicalDevice*);
using PFN_vkGetPhysicalDeviceProperties = void (*)(VkPhysicalDevice, void*);
using PFN_vkGetPhysicalDeviceMemoryProperties = void (*)(VkPhysicalDevice, VkPhysicalDeviceMemoryProperties*);
// Vulkan 1.1's properties chain, for the two limits ggml-vulkan sizes its buffers by.
struct VkBaseOut {
    int sType;
    void* pNext;
};
struct VkPhysicalDeviceMaintenance3Properties {  // VK_STRUCTURE_TYPE_…_MAINTENANCE_3_PROPERTIES = 1000168000
    int sType;
    void* pNext;
    std::uint32_t maxPerSetDescriptors;
    std::uint64_t maxMemoryAllocationSize;
};
struct VkPhysicalDeviceMaintenance4Properties {  // VK_STRUCTURE_TYPE_…_MAINTENANCE_4_PROPERTIES = 1000413001
    int sType;
    void* pNext;
    std::uint64_t maxBufferSize;
};
using PFN_vkGetPhysicalDeviceProperties2 = void (*)(VkPhysicalDevice, void*);
}

// ggml-vulkan's max_memory_allocation_size: min(maxMemoryAllocationSize, maxBufferSize) where the driver
// reports maintenance4, maxMemoryAllocationSize otherwise; 0 when neither is known.
std::uint64_t largest_allocation(PFN_vkGetPhysicalDeviceProperties2 props2, VkPhysicalDevice pd) {
    if (!props2) return 0;
    VkPhysicalDeviceMaintenance4Properties m4{1000413001, nullptr, 0};
    VkPhysicalDeviceMaintenance3Properties m3{1000168000, &m4, 0, 0};
    // VkPhysicalDeviceProperties2 = {sType 1000059001, pNext, VkPhysicalDeviceProperties (< 1 KiB)}.
    alignas(16) unsigned char buf[4096] = {};
    VkBaseOut head{1000059001, &m3};
    std::memcpy(buf, &head, sizeof head);
    props2(pd, buf);
    if (m3.maxMemoryAllocationSize == 0) return 0;
    return m4.maxBufferSize ? std::min(m3.maxMemoryAllocationSize, m4.maxBufferSize)
                            : m3.maxMemoryAllocationSize;
}

// Vulkan's deviceType: 1 integrated, 2 discrete, 3 virtual, 4 CPU (a software implementation).
constexpr int kIntegratedGpu = 1, kCpuType = 4;

bool same_device(const Device& d, std::uint32_t vendor, const std::string& device_id) {
    // AMD by PCI device id (sysfs has it); NVIDIA by vendor in enumeration order (NVML's figures carry no
    // PCI device id; one GPU, the usual case, is exact).
    if (vendor == 0x1002) return d.vendor == Vendor::amd && d.pci_device_id == device_id;
    if (vendor == 0x10de) return d.vendor == Vendor::nvidia;
    return false;
}

// One physical device as the probes see it: from libvulkan or from a captured vulkan.json.
struct VulkanDevice {
    int index = 0;
    std::uint32_t vendor = 0;
    std::string device_id;  // "0x1586"
    std::string name;
    int type = 0;
    std::optional<std::uint64_t> heap, most;
    std::string heap_from, most_from;
};

// Fills the matching device's Vulkan figures, or adds a `vulkan:N` device for one of a vendor that no
// other probe reported (a second driver for a GPU already known — RADV beside AMDVLK — adds nothing).
void place(std::vector<Device>& devices, std::vector<bool>& taken, const VulkanDevice& v, bool software) {
    for (std::size_t i = 0; i < devices.size(); ++i) {
        auto& d = devices[i];
        if (taken[i] || !same_device(d, v.vendor, v.device_id)) continue;
        taken[i] = true;
        if (v.heap)
            d.vulkan_device_local_heap =
                ProbedFigure::known({*v.heap, Source::measured, v.heap_from}, v.heap_from);
        if (v.most)
            d.vulkan_max_allocation =
                ProbedFigure::known({*v.most, Source::measured, v.most_from}, v.most_from);
        d.vulkan_index = v.index;
        return;
    }
    const bool known_vendor = std::any_of(devices.begin(), devices.end(), [&](const Device& d) {
        return (v.vendor == 0x1002 && d.vendor == Vendor::amd) ||
               (v.vendor == 0x10de && d.vendor == Vendor::nvidia);
    });
    if (known_vendor || (v.type == kCpuType && !software) || !v.heap) return;
    Device d;
    d.id = fmt::format("vulkan:{}", v.index);
    d.vendor = Vendor::vulkan;
    d.software = v.type == kCpuType;
    d.kind = v.type == kIntegratedGpu || d.software ? DeviceKind::integrated : DeviceKind::discrete;
    d.kind_reason = d.software ? "Vulkan deviceType CPU: a software implementation on the CPU's cores and RAM"
                    : v.type == kIntegratedGpu ? "Vulkan deviceType INTEGRATED_GPU"
                                               : "Vulkan deviceType " + std::to_string(v.type);
    d.name = v.name;
    d.pci_device_id = v.device_id;
    d.vulkan_index = v.index;
    d.ordinal = v.index;  // its backend is Vulkan: the Vulkan index is how its runtime numbers it
    d.compute = Probed<std::string>::unknown("Vulkan only");
    d.driver_version = Probed<std::string>::unknown("Vulkan only");
    d.firmware_version = Probed<std::string>::unknown("Vulkan only");
    MemoryPool pool;
    pool.kind = PoolKind::vram;
    pool.total = ProbedFigure::known({*v.heap, Source::measured, v.heap_from}, v.heap_from);
    pool.used = ProbedFigure::unknown("Vulkan 1.0 reports no use");
    pool.free = ProbedFigure::unknown("Vulkan 1.0 reports no use");
    d.pools.push_back(std::move(pool));
    d.vulkan_device_local_heap = ProbedFigure::known({*v.heap, Source::measured, v.heap_from}, v.heap_from);
    if (v.most)
        d.vulkan_max_allocation = ProbedFigure::known({*v.most, Source::measured, v.most_from}, v.most_from);
    d.processes_note = "Vulkan reports no per-process use";
    devices.push_back(std::move(d));
    taken.push_back(true);
}

}  // namespace

std::string probe_vulkan(std::vector<Device>& devices, bool software) {
    SharedLibrary lib(dlopen("libvulkan.so.1", RTLD_NOW | RTLD_LOCAL));
    if (!lib) return "Vulkan not probed: libvulkan.so.1 not found";
    auto gipa = library_symbol<PFN_vkGetInstanceProcAddr>(lib.get(), "vkGetInstanceProcAddr");
    if (!gipa) return "Vulkan not probed: libvulkan.so.1 has no vkGetInstanceProcAddr";
    auto create = reinterpret_cast<PFN_vkCreateInstance>(gipa(nullptr, "vkCreateInstance"));
    if (!create) return "Vulkan not probed: no vkCreateInstance";
    VkApplicationInfo app{0, nullptr, "loch", 1, "loch", 1, (1u << 22) | (1u << 12)};  // VK_API_VERSION_1_1
    VkInstanceCreateInfo info{1, nullptr, 0, &app, 0, nullptr, 0, nullptr};
    VkInstance instance = nullptr;
    if (VkResult rc = create(&info, nullptr, &instance); rc != 0 || !instance)
        return fmt::format("Vulkan not probed: vkCreateInstance returned {}", rc);
    auto destroy = reinterpret_cast<PFN_vkDestroyInstance>(gipa(instance, "vkDestroyInstance"));
    struct Destroy {
        PFN_vkDestroyInstance fn;
        VkInstance inst;
        ~Destroy() {
            if (fn) fn(inst, nullptr);
        }
    } destroy_guard{destroy, instance};

    auto enumerate =
        reinterpret_cast<PFN_vkEnumeratePhysicalDevices>(gipa(instance, "vkEnumeratePhysicalDevices"));
    auto props_fn =
        reinterpret_cast<PFN_vkGetPhysicalDeviceProperties>(gipa(instance, "vkGetPhysicalDeviceProperties"));
    auto mem_fn = reinterpret_cast<PFN_vkGetPhysicalDeviceMemoryProperties>(
        gipa(instance, "vkGetPhysicalDeviceMemoryProperties"));
    if (!enumerate || !props_fn || !mem_fn) return "Vulkan not probed: physical-device entry points missing";
    auto props2_fn =  // Vulkan 1.1; nullptr on a 1.0 loader (the largest allocation stays unknown)
        reinterpret_cast<PFN_vkGetPhysicalDeviceProperties2>(
            gipa(instance, "vkGetPhysicalDeviceProperties2"));
    std::uint32_t n = 0;
    if (enumerate(instance, &n, nullptr) != 0 || n == 0) return "Vulkan: no physical devices";
    std::vector<VkPhysicalDevice> phys(n);
    if (enumerate(instance, &n, phys.data()) < 0) return "Vulkan: vkEnumeratePhysicalDevices failed";
    phys.resize(n);

    std::vector<bool> taken(devices.size(), false);
    for (std::size_t i = 0; i < phys.size(); ++i) {
        auto* pd = phys[i];
        alignas(16) unsigned char buf[4096] = {};  // VkPhysicalDeviceProperties is < 1 KiB
        props_fn(pd, buf);
        VkPhysicalDevicePropertiesPrefix props;
        std::memcpy(&props, buf, sizeof props);
        VkPhysicalDeviceMemoryProperties mem{};
        mem_fn(pd, &mem);
        std::uint64_t largest = 0;
        for (std::uint32_t h = 0; h < mem.memoryHeapCount && h < 16; ++h)
            if ((mem.memoryHeaps[h].flags & 1u) && mem.memoryHeaps[h].size > largest)
                largest = mem.memoryHeaps[h].size;
        VulkanDevice v;
        v.index = static_cast<int>(i);
        v.vendor = props.vendorID;
        v.device_id = fmt::format("0x{:04x}", props.deviceID);
        v.name = std::string(props.deviceName, strnlen(props.deviceName, sizeof props.deviceName));
        v.type = props.deviceType;
        v.heap = largest;
        v.heap_from = fmt::format("Vulkan {} largest DEVICE_LOCAL heap", v.name);
        if (const auto most = largest_allocation(props2_fn, pd)) {
            v.most = most;
            v.most_from = fmt::format("Vulkan {} min(maxMemoryAllocationSize, maxBufferSize)", v.name);
        }
        place(devices, taken, v, software);
    }
    return {};
}

std::string probe_vulkan_capture(const Sysroot& root, std::vector<Device>& devices, bool software) {
    const auto text = root.read("/vulkan.json");
    if (!text) return "Vulkan not probed: captured tree (--sysroot) without vulkan.json";
    const auto where = root.resolve("/vulkan.json").string();
    const auto j = nlohmann::json::parse(*text.value, nullptr, false);
    if (j.is_discarded() || !j.is_object() || !j.contains("devices") || !j["devices"].is_array())
        return where + ": not a JSON object with a \"devices\" array";
    const auto hex = [](const nlohmann::json& v) -> std::optional<std::uint32_t> {
        if (v.is_number_unsigned()) return v.get<std::uint32_t>();
        if (!v.is_string()) return std::nullopt;
        try {
            return static_cast<std::uint32_t>(std::stoul(v.get<std::string>(), nullptr, 16));
        } catch (const std::exception&) {
            return std::nullopt;
        }
    };
    const auto bytes = [](const nlohmann::json& e, const char* key) -> std::optional<std::uint64_t> {
        if (!e.contains(key) || !e[key].is_number_unsigned()) return std::nullopt;
        return e[key].get<std::uint64_t>();
    };
    std::vector<bool> taken(devices.size(), false);
    int index = -1;
    for (const auto& e : j["devices"]) {
        ++index;
        if (!e.is_object() || !e.contains("vendor_id") || !e.contains("device_id")) continue;
        const auto vendor = hex(e["vendor_id"]);
        const auto device = hex(e["device_id"]);
        if (!vendor || !device) continue;
        VulkanDevice v;
        v.index = index;
        v.vendor = *vendor;
        v.device_id = fmt::format("0x{:04x}", *device);
        v.name = e.contains("name") && e["name"].is_string() ? e["name"].get<std::string>() : "";
        const std::string type =
            e.contains("type") && e["type"].is_string() ? e["type"].get<std::string>() : "";
        v.type = type == "cpu" ? kCpuType : type == "integrated" ? kIntegratedGpu : 2;
        v.heap = bytes(e, "device_local_heap_bytes");
        v.heap_from = fmt::format("Vulkan {} largest DEVICE_LOCAL heap ({})", v.name, where);
        v.most = bytes(e, "max_allocation_bytes");
        v.most_from = fmt::format("Vulkan {} largest allocation ({})", v.name, where);
        place(devices, taken, v, software);
    }
    return {};
}

}  // namespace loch::devices
