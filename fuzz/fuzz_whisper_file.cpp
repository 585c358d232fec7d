// libFuzzer target for the whisper.cpp model reader: any bytes must either parse or throw gguf::FormatError,
// never crash, hang or allocate without bound. What parses has a tensor table whisper.cpp would create (or
// a clear std::invalid_argument), and its header survives a write/read round trip.
// fuzz-module: gguf
#include <cstddef>
#include <cstdint>
#include <span>
#include <stdexcept>

#include "gguf/reader.hpp"
#include "gguf/whisper_file.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
    using namespace loch::gguf;
    const std::span<const std::byte> bytes(reinterpret_cast<const std::byte*>(data), size);
    WhisperFile f;
    try {
        f = parse_whisper(bytes, "fuzz.bin");
    } catch (const FormatError&) {
        return 0;
    }
    // Small shapes only: a header may claim a width of 2^20, whose tensors are terabytes.
    if (f.hp.n_audio_state > 512 || f.hp.n_vocab > 4096 || f.hp.n_mels > 256 || f.hp.n_audio_ctx > 4096 ||
        f.hp.n_text_ctx > 4096 || f.hp.n_audio_layer > 8 || f.hp.n_text_layer > 8)
        return 0;
    try {
        (void)whisper_tensors(f.hp);
    } catch (const std::invalid_argument&) {
        return 0;
    }
    const auto again = parse_whisper(serialize_whisper(f.hp, false), "again.bin");
    if (again.hp.n_vocab != f.hp.n_vocab || again.hp.ftype != f.hp.ftype ||
        again.hp.n_text_layer != f.hp.n_text_layer)
        __builtin_trap();
    return 0;
}
