// libFuzzer target for the GGUF reader: any bytes must either parse or throw gguf::FormatError, never crash,
// hang or allocate without bound. What parses must also summarize, print, and survive a write/read round
// trip unchanged (writer and reader agree on every file the reader accepts).
// fuzz-module: gguf
#include <cstddef>
#include <cstdint>
#include <span>

#include "gguf/reader.hpp"
#include "gguf/summary.hpp"
#include "gguf/writer.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
    using namespace loch::gguf;
    const std::span<const std::byte> bytes(reinterpret_cast<const std::byte*>(data), size);
    Model m;
    try {
        m = parse(bytes, "fuzz.gguf");
    } catch (const FormatError&) {
        return 0;
    }
    const Summary s = summarize(m);
    (void)to_json(s).dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
    (void)to_text(s);

    // A file without tensors may declare a huge general.alignment (up to 2^31) that its own bytes never
    // reach; writing it back would pad to that size, which says nothing about the reader.
    if (m.alignment > size) return 0;
    const std::vector<std::byte> once = serialize(m);
    // Same layout as the input; only the final padding may be added.
    if (once.size() > size + m.alignment) __builtin_trap();
    const std::vector<std::byte> twice = serialize(parse(once, "roundtrip.gguf"));
    if (once != twice) __builtin_trap();
    return 0;
}
