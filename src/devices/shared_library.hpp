// devices/shared_library — a library opened with dlopen, closed when it goes out of scope: how the probes
// reach NVML and Vulkan without a link-time dependency on a driver.
#pragma once

#include <dlfcn.h>

#include <memory>

namespace loch::devices {

struct DlClose {
    void operator()(void* h) const {
        if (h) dlclose(h);
    }
};
using SharedLibrary = std::unique_ptr<void, DlClose>;

// A function of `lib` by name (null when it has none), as the caller's function-pointer type.
template <class Fn>
Fn library_symbol(void* lib, const char* name) {
    return reinterpret_cast<Fn>(dlsym(lib, name));
}

}  // namespace loch::devices
