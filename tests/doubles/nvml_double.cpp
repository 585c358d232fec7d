// TEST DOUBLE of libnvidia-ml.so.1: implements the NVML C ABI subset loch's probe calls (declared in
// src/devices/nvml_abi.hpp) and answers with canned numbers. Not NVML; never shipped.
//
// LOCH_NVML_DOUBLE_SCENARIO picks the canned answers:
//   (unset) / "h200"   one "NVIDIA H200" with 141 GiB, 2 compute processes (one without a memory figure)
//   "init-fails"       nvmlInit_v2 returns NVML_ERROR_DRIVER_NOT_LOADED (9)
//   "many-processes"   100 processes of 1 MiB each (more than the probe's first buffer holds)
//   "v1-only"          nvmlDeviceGetMemoryInfo_v2 is not supported (NVML_ERROR_FUNCTION_NOT_FOUND, 13)
#include <cstdlib>
#include <cstring>
#include <string>

#include "devices/nvml_abi.hpp"

using namespace loch::devices::nvml;

namespace {

std::string scenario() {
    const char* s = std::getenv("LOCH_NVML_DOUBLE_SCENARIO");
    return s ? s : "h200";
}

nvmlDevice_t the_device() {
    static int marker = 0;
    return reinterpret_cast<nvmlDevice_t>(&marker);
}

constexpr unsigned long long kTotal = 150754820096ull;  // 143771 MiB, what an H200 reports
constexpr unsigned long long kUsed = 20ull << 30;       // v1: includes the driver's reservation
constexpr unsigned long long kReserved = 615ull << 20;  // what an idle H200 keeps (NVML v2 `reserved`)

}  // namespace

extern "C" {

__attribute__((visibility("default"))) nvmlReturn_t nvmlInit_v2() {
    return scenario() == "init-fails" ? 9 : NVML_SUCCESS;
}
__attribute__((visibility("default"))) nvmlReturn_t nvmlShutdown() {
    return NVML_SUCCESS;
}
__attribute__((visibility("default"))) const char* nvmlErrorString(nvmlReturn_t rc) {
    return rc == 9 ? "Driver Not Loaded" : rc == 7 ? "Insufficient Size" : "Unknown Error";
}
__attribute__((visibility("default"))) nvmlReturn_t nvmlDeviceGetCount_v2(unsigned int* count) {
    *count = 1;
    return NVML_SUCCESS;
}
__attribute__((visibility("default"))) nvmlReturn_t nvmlDeviceGetHandleByIndex_v2(unsigned int i,
                                                                                  nvmlDevice_t* device) {
    if (i != 0) return 2;  // NVML_ERROR_INVALID_ARGUMENT
    *device = the_device();
    return NVML_SUCCESS;
}
__attribute__((visibility("default"))) nvmlReturn_t nvmlDeviceGetName(nvmlDevice_t, char* name,
                                                                      unsigned int n) {
    std::strncpy(name, "NVIDIA H200", n - 1);
    name[n - 1] = '\0';
    return NVML_SUCCESS;
}
__attribute__((visibility("default"))) nvmlReturn_t nvmlDeviceGetMemoryInfo(nvmlDevice_t, nvmlMemory_t* m) {
    m->total = kTotal;
    m->used = kUsed;
    m->free = kTotal - kUsed;
    return NVML_SUCCESS;
}
__attribute__((visibility("default"))) nvmlReturn_t nvmlDeviceGetMemoryInfo_v2(nvmlDevice_t,
                                                                               nvmlMemory_v2_t* m) {
    if (scenario() == "v1-only") return 13;
    if (m->version != nvmlMemory_v2) return 25;  // NVML_ERROR_ARGUMENT_VERSION_MISMATCH
    m->total = kTotal;
    m->reserved = kReserved;
    m->used = kUsed - kReserved;
    m->free = kTotal - kUsed;
    return NVML_SUCCESS;
}
__attribute__((visibility("default"))) nvmlReturn_t nvmlSystemGetDriverVersion(char* v, unsigned int n) {
    std::strncpy(v, "570.133.20", n - 1);
    v[n - 1] = '\0';
    return NVML_SUCCESS;
}
__attribute__((visibility("default"))) nvmlReturn_t nvmlDeviceGetCudaComputeCapability(nvmlDevice_t,
                                                                                       int* major,
                                                                                       int* minor) {
    *major = 9;
    *minor = 0;
    return NVML_SUCCESS;
}
__attribute__((visibility("default"))) nvmlReturn_t nvmlDeviceGetComputeRunningProcesses_v3(
    nvmlDevice_t, unsigned int* count, nvmlProcessInfo_t* infos) {
    const bool many = scenario() == "many-processes";
    const unsigned n = many ? 100 : 2;
    if (*count < n) {
        *count = n;
        return NVML_ERROR_INSUFFICIENT_SIZE;
    }
    for (unsigned i = 0; i < n; ++i) {
        infos[i] = {};
        infos[i].pid = many ? 10000 + i : (i == 0 ? 4242 : 999);
        infos[i].usedGpuMemory = many ? (1ull << 20) : (i == 0 ? 18ull << 30 : NVML_VALUE_NOT_AVAILABLE);
    }
    *count = n;
    return NVML_SUCCESS;
}

}  // extern "C"
