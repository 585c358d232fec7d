// devices/nvml_abi — the subset of NVML's C ABI loch calls, declared here so that loch has no build or link
// dependency on the CUDA toolkit (libnvidia-ml.so.1 is dlopen'ed at run time). Layouts and values as in
// nvml.h; the NVML test double (tests/doubles/) implements the same declarations.
#pragma once

namespace loch::devices::nvml {

extern "C" {
using nvmlReturn_t = int;
using nvmlDevice_t = struct nvmlDevice_st*;

inline constexpr nvmlReturn_t NVML_SUCCESS = 0;
inline constexpr nvmlReturn_t NVML_ERROR_INSUFFICIENT_SIZE = 7;
inline constexpr unsigned long long NVML_VALUE_NOT_AVAILABLE = ~0ull;
inline constexpr unsigned NVML_DEVICE_NAME_BUFFER_SIZE = 96;
inline constexpr unsigned NVML_SYSTEM_DRIVER_VERSION_BUFFER_SIZE = 80;
inline constexpr unsigned NVML_DEVICE_UUID_BUFFER_SIZE = 96;
inline constexpr unsigned NVML_DEVICE_VBIOS_VERSION_BUFFER_SIZE = 32;

struct nvmlMemory_t {  // nvmlDeviceGetMemoryInfo (v1)
    unsigned long long total;
    unsigned long long free;
    unsigned long long used;
};

struct nvmlMemory_v2_t {  // nvmlDeviceGetMemoryInfo_v2: `reserved` (driver/firmware) apart from `used`
    unsigned int version;
    unsigned long long total;
    unsigned long long reserved;
    unsigned long long free;
    unsigned long long used;
};
inline constexpr unsigned nvmlMemory_v2 = static_cast<unsigned>(sizeof(nvmlMemory_v2_t)) | (2u << 24);

struct nvmlProcessInfo_v1_t {  // nvmlDeviceGetComputeRunningProcesses (unversioned symbol)
    unsigned int pid;
    unsigned long long usedGpuMemory;
};

struct nvmlProcessInfo_t {  // _v2 and _v3
    unsigned int pid;
    unsigned long long usedGpuMemory;
    unsigned int gpuInstanceId;
    unsigned int computeInstanceId;
};

using InitFn = nvmlReturn_t (*)();
using ShutdownFn = nvmlReturn_t (*)();
using ErrorStringFn = const char* (*)(nvmlReturn_t);
using GetCountFn = nvmlReturn_t (*)(unsigned int*);
using GetHandleFn = nvmlReturn_t (*)(unsigned int, nvmlDevice_t*);
using GetNameFn = nvmlReturn_t (*)(nvmlDevice_t, char*, unsigned int);
using GetMemoryFn = nvmlReturn_t (*)(nvmlDevice_t, nvmlMemory_t*);
using GetMemoryV2Fn = nvmlReturn_t (*)(nvmlDevice_t, nvmlMemory_v2_t*);
using GetProcessesFn = nvmlReturn_t (*)(nvmlDevice_t, unsigned int*, nvmlProcessInfo_t*);
using GetProcessesV1Fn = nvmlReturn_t (*)(nvmlDevice_t, unsigned int*, nvmlProcessInfo_v1_t*);
using DriverVersionFn = nvmlReturn_t (*)(char*, unsigned int);
using ComputeCapabilityFn = nvmlReturn_t (*)(nvmlDevice_t, int*, int*);
}

}  // namespace loch::devices::nvml
