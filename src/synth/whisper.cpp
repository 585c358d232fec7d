// Whisper's release shapes (openai/whisper's model dims; large-v3 has 128 mel bins and one more token;
// large-v3-turbo keeps the large encoder and four decoder layers).
#include "synth/whisper.hpp"

namespace loch::synth {

namespace {

gguf::WhisperHparams shape(std::int32_t state, std::int32_t heads, std::int32_t enc_layers,
                           std::int32_t dec_layers, std::int32_t mels = 80, std::int32_t vocab = 51865) {
    gguf::WhisperHparams hp;
    hp.n_vocab = vocab;
    hp.n_audio_state = hp.n_text_state = state;
    hp.n_audio_head = hp.n_text_head = heads;
    hp.n_audio_layer = enc_layers;
    hp.n_text_layer = dec_layers;
    hp.n_mels = mels;
    return hp;
}

}  // namespace

const std::vector<WhisperPreset>& whisper_presets() {
    static const std::vector<WhisperPreset> presets{
        {"whisper-tiny", "39 M: 4+4 layers, width 384", shape(384, 6, 4, 4)},
        {"whisper-base", "74 M: 6+6 layers, width 512", shape(512, 8, 6, 6)},
        {"whisper-small", "244 M: 12+12 layers, width 768", shape(768, 12, 12, 12)},
        {"whisper-medium", "769 M: 24+24 layers, width 1024", shape(1024, 16, 24, 24)},
        {"whisper-large-v3", "1550 M: 32+32 layers, width 1280, 128 mels",
         shape(1280, 20, 32, 32, 128, 51866)},
        {"whisper-large-v3-turbo", "809 M: 32+4 layers, width 1280, 128 mels",
         shape(1280, 20, 32, 4, 128, 51866)},
    };
    return presets;
}

const WhisperPreset* find_whisper_preset(std::string_view name) {
    for (const auto& p : whisper_presets())
        if (p.name == name) return &p;
    return nullptr;
}

std::uint64_t whisper_parameters(const gguf::WhisperHparams& hp) {
    std::uint64_t n = 0;
    for (const auto& t : gguf::whisper_tensors(hp)) {
        std::uint64_t e = 1;
        for (auto d : t.ne) e *= static_cast<std::uint64_t>(d);
        n += e;
    }
    return n;
}

}  // namespace loch::synth
