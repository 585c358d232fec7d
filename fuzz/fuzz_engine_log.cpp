// libFuzzer target for the llama-server log parser (plan/engine_log): a log is outside input (the engine
// may print anything, a model name can hold any bytes). Any text must parse without a crash, a hang or
// an exception; the footprint it yields must be internally consistent and serializable.
// fuzz-module: plan
#include <cstddef>
#include <cstdint>
#include <string_view>

#include <nlohmann/json.hpp>

#include "plan/engine_log.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
    const std::string_view text(reinterpret_cast<const char*>(data), size);
    const auto fp = loch::plan::parse_engine_log(text);
    std::uint64_t sum = 0;
    for (const auto& d : fp.devices()) sum += fp.device_total(d).bytes;
    std::uint64_t all = 0;
    for (const auto& b : fp.buffers) all += b.total();
    if (sum != all) __builtin_trap();  // every buffer belongs to exactly one device
    const nlohmann::json j = fp;
    (void)j.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
    return 0;
}
