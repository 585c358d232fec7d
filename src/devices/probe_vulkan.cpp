// Vulkan heap sizes, by dlopen of libvulkan.so.1 (no build dependency on the Vulkan SDK). Vulkan engines
// (llama.cpp's Vulkan backend, stable-diffusion.cpp) can only allocate what the driver's DEVICE_LOCAL heap
// offers; on APUs Mesa RADV reports only a few GiB there even when GTT is 100+ GiB.
#include <dlfcn.h>

#include <fmt/format.h>

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
}

}  // namespace

std::string probe_vulkan(std::vector<Device>& devices) {
    SharedLibrary lib(dlopen("libvulkan.so.1", RTLD_NOW | RTLD_LOCAL));
    if (!lib) return "Vulkan not probed: libvulkan.so.1 not found";
    auto gipa = library_symbol<PFN_vkGetInstanceProcAddr>(lib.get(), "vkGetInstanceProcAddr");
    if (!gipa) return "Vulkan not probed: libvulkan.so.1 has no vkGetInstanceProcAddr";
    auto create = reinterpret_cast<PFN_vkCreateInstance>(gipa(nullptr, "vkCreateInstance"));
    if (!create) return "Vulkan not probed: no vkCreateInstance";
    VkApplicationInfo app{0, nullptr, "loch", 1, "loch", 1, (1u << 22)};  // VK_API_VERSION_1_0
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
    std::uint32_t n = 0;
    if (enumerate(instance, &n, nullptr) != 0 || n == 0) return "Vulkan: no physical devices";
    std::vector<VkPhysicalDevice> phys(n);
    if (enumerate(instance, &n, phys.data()) < 0) return "Vulkan: vkEnumeratePhysicalDevices failed";
    phys.resize(n);

    std::vector<bool> taken(devices.size(), false);
    for (auto* pd : phys) {
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
        const auto device_id = fmt::format("0x{:04x}", props.deviceID);
        for (std::size_t i = 0; i < devices.size(); ++i) {
            auto& d = devices[i];
            if (taken[i] || props.vendorID != 0x1002 || d.vendor != Vendor::amd ||
                d.pci_device_id != device_id)
                continue;
            taken[i] = true;
            const std::string name(props.deviceName, strnlen(props.deviceName, sizeof props.deviceName));
            const auto detail = fmt::format("Vulkan {} largest DEVICE_LOCAL heap", name);
            d.vulkan_device_local_heap = ProbedFigure::known({largest, Source::measured, detail}, detail);
            break;
        }
    }
    return {};
}

}  // namespace loch::devices
