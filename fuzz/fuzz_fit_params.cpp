// libFuzzer target for the llama-fit-params output parser (plan/dry_run): the dry run's stdout is outside
// input. Any text must either parse into device rows or throw std::runtime_error — nothing else.
// fuzz-module: plan
#include <cstddef>
#include <cstdint>
#include <stdexcept>
#include <string_view>

#include "plan/dry_run.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
    const std::string_view text(reinterpret_cast<const char*>(data), size);
    try {
        const auto r = loch::plan::parse_fit_print(text);
        if (r.devices.empty()) __builtin_trap();  // success means at least one device row
        for (const auto& d : r.devices)
            if (d.total() < d.model.bytes) __builtin_trap();  // no overflow
    } catch (const std::runtime_error&) {
    }
    return 0;
}
