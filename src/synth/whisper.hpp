// synth/whisper — synthetic whisper.cpp models: the real shapes of OpenAI's Whisper releases in whisper.cpp's
// own format (gguf/whisper_file.hpp), all-zero weights as a sparse file. whisper-server loads them, allocates
// exactly what it would for the real release and transcribes (to meaningless tokens) in real time.
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "gguf/whisper_file.hpp"

namespace loch::synth {

struct WhisperPreset {
    std::string name;  // "whisper-tiny" … "whisper-large-v3-turbo"
    std::string description;
    gguf::WhisperHparams hp;
};
const std::vector<WhisperPreset>& whisper_presets();
const WhisperPreset* find_whisper_preset(std::string_view name);
// Parameters (elements of every tensor) of a shape.
std::uint64_t whisper_parameters(const gguf::WhisperHparams& hp);

}  // namespace loch::synth
