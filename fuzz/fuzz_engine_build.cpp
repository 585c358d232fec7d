// libFuzzer target for engine-build.json (config/engine_builds): a file beside the engine binaries that a
// person may edit or break. Any text must give a build of a known or unknown backend — never a throw.
// fuzz-module: config
#include <cstddef>
#include <cstdint>
#include <string_view>

#include "config/engine_builds.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
    const std::string_view text(reinterpret_cast<const char*>(data), size);
    const auto b =
        loch::config::describe_engine_build(text, "llama-server", "/x/llama-server", "/x/engine-build.json");
    if (b.program != "/x/llama-server" || b.from.empty()) __builtin_trap();
    if (b.backend.empty() && b.from == "/x/engine-build.json") __builtin_trap();  // unknown always says why
    return 0;
}
