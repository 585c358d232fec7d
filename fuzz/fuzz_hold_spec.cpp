// Fuzzes the request for a hold (POST /loch/holds, broker/holds.hpp) with arbitrary bytes as its body. Any
// outcome but a crash, a leak or an exception other than broker::Error is a finding; an accepted request
// must be one the broker can act on (a valid name, a size in range or none).
// fuzz-sources: broker/hold_spec.cpp broker/error.cpp config/values.cpp
#include <cstddef>
#include <cstdint>
#include <string_view>

#include <nlohmann/json.hpp>

#include "broker/error.hpp"
#include "broker/holds.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
    const std::string_view body(reinterpret_cast<const char*>(data), size);
    const auto json = nlohmann::json::parse(body, nullptr, false);
    if (json.is_discarded()) return 0;
    try {
        const auto spec = loch::broker::hold_spec_from_json(json);
        if (spec.name.empty() || spec.name.size() > 64) __builtin_trap();
        if (spec.bytes && (*spec.bytes == 0 || *spec.bytes > (std::uint64_t{1} << 50))) __builtin_trap();
        if (spec.ttl.count() < 1) __builtin_trap();
    } catch (const loch::broker::Error&) {
    }
    return 0;
}
