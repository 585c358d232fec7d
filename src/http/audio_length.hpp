// http/audio_length — an uploaded audio file's duration, from its header, where that is cheap and exact:
// WAV (RIFF "fmt " byte rate, "data" size). Other formats (MP3, FLAC, Ogg) say nothing here: their length
// is only known by decoding, which the engine does. Outside input: bounds-checked, fuzzed through
// fuzz_openai_request.
#pragma once

#include <optional>
#include <string_view>

namespace loch::http {

// Seconds of audio in a WAV file; nullopt for anything else or a header that does not add up.
std::optional<double> audio_seconds(std::string_view file);

}  // namespace loch::http
