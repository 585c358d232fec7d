// Fuzzes the config loader: YAML text is outside input. Any input must end in a Config or a ConfigError
// with diagnostics — never a crash, a hang or another exception. Files are not checked (no filesystem).
// The real engine kinds parse their own sections, so their parsers are fuzzed too.
// fuzz-module: engines
#include <cstddef>
#include <cstdint>
#include <string_view>

#include "config/config.hpp"
#include "engines/kind.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
    static const loch::config::LoadContext ctx = [] {
        loch::config::LoadContext c;
        c.cwd = "/nonexistent-fuzz";
        c.exe_dir = "/nonexistent-fuzz/bin";
        c.default_state_dir = "/nonexistent-fuzz/state";
        c.check_files = false;
        c.kinds = loch::engines::kind_schemas();
        return c;
    }();
    const std::string_view text(reinterpret_cast<const char*>(data), size);
    try {
        const auto cfg = loch::config::parse_config(text, "fuzz.yaml", ctx);
        for (const auto& m : cfg.models) (void)cfg.find_model(m.name);
    } catch (const loch::config::ConfigError& e) {
        if (e.diagnostics().empty()) __builtin_trap();  // an error must say what is wrong
    }
    return 0;
}
