// Every flag of the pinned whisper-server (whisper.cpp 1.8.5 from pywhispercpp 1.5.1,
// examples/server/server.cpp), classified for `whisper.extra` (engines/flags/table.hpp).
#include "engines/flags/table.hpp"

namespace loch::engines::flags {

namespace whisper_server_table {  // named: the four tables share a unity batch

constexpr auto N = FlagClass::neutral;
constexpr auto R = FlagClass::refused;
constexpr auto L = FlagClass::loch;

constexpr std::string_view kDecode = "a default of the decoding arithmetic: no allocation";
constexpr std::string_view kOutput = "what a transcription's text shows: no allocation";
constexpr std::string_view kVadOnly =
    "tunes voice activity detection, which needs --vad (refused): no allocation";

const FlagTable kTable{
    "whisper-server",
    /*equals_form=*/false,
    /*underscores_are_hyphens=*/false,
    {
        {{"-h", "--help"}, 0, R, "it prints and exits: the engine would never serve"},
        {{"-t", "--threads"},
         1,
         L,
         "set whisper.threads: loch counts an engine's compute threads on the CPU"},
        {{"-p", "--processors"}, 1, L, "set whisper.processors: each processor holds its own state, planned"},
        {{"-ot", "--offset-t"}, 1, N, kDecode},
        {{"-on", "--offset-n"}, 1, N, kDecode},
        {{"-d", "--duration"}, 1, N, kDecode},
        {{"-mc", "--max-context"},
         1,
         N,
         "text context tokens kept as a prompt: the KV is allocated at its full size"},
        {{"-ml", "--max-len"}, 1, N, kOutput},
        {{"-sow", "--split-on-word"}, 0, N, kOutput},
        {{"-bo", "--best-of"},
         1,
         L,
         "decoders reallocate the KV: a request's best_of is checked against whisper.max_decoders, which the "
         "reservation is planned for"},
        {{"-bs", "--beam-size"},
         1,
         L,
         "decoders reallocate the KV: a request's beam_size is checked against whisper.max_decoders, which "
         "the "
         "reservation is planned for"},
        {{"-ac", "--audio-ctx"}, 1, N, "a shorter audio context only lowers the encoder's memory"},
        {{"-wt", "--word-thold"}, 1, N, kDecode},
        {{"-et", "--entropy-thold"}, 1, N, kDecode},
        {{"-lpt", "--logprob-thold"}, 1, N, kDecode},
        {{"-debug", "--debug-mode"}, 0, N, "dumps intermediate data to the log: no allocation"},
        {{"-tr", "--translate"}, 0, N, kDecode},
        {{"-di", "--diarize"}, 0, N, "stereo diarization compares the channels' energy: no allocation"},
        {{"-tdrz", "--tinydiarize"}, 0, N, "speaker-turn tokens of a tdrz model: no allocation"},
        {{"-nf", "--no-fallback"}, 0, N, kDecode},
        {{"-fp", "--font-path"}, 1, N, "a font for the command-line tool's output: unused by the server"},
        {{"-ps", "--print-special"}, 0, N, kOutput},
        {{"-pc", "--print-colors"}, 0, N, kOutput},
        {{"-pr", "--print-realtime"}, 0, N, kOutput},
        {{"-pp", "--print-progress"}, 0, N, kOutput},
        {{"-nt", "--no-timestamps"}, 0, N, kOutput},
        {{"-l", "--language"}, 1, L, "set whisper.language"},
        {{"-dl", "--detect-language"}, 0, N, kDecode},
        {{"--prompt"}, 1, N, kDecode},
        {{"--carry-initial-prompt"}, 0, N, kDecode},
        {{"-m", "--model"}, 1, L, "the model's path"},
        {{"-oved", "--ov-e-device"},
         1,
         R,
         "an OpenVINO encoder is another model on another device, not planned"},
        {{"-dtw", "--dtw"},
         1,
         R,
         "token-level timestamps keep the alignment heads' attention, which loch does not plan"},
        {{"--host"}, 1, L, "engines listen on 127.0.0.1, reachable only by loch"},
        {{"--port"}, 1, L, "loch gives each engine its port"},
        {{"--public"}, 1, R, "serves the files of a folder: engines serve only loch's requests"},
        {{"--request-path"}, 1, R, "loch calls the engine's routes at their own paths"},
        {{"--inference-path"}, 1, L, "loch calls the engine's routes at their own paths"},
        {{"--convert"}, 0, R, "runs ffmpeg beside the engine: a process and memory loch does not book"},
        {{"--tmp-dir"}, 1, N, "where --convert (refused) writes: no allocation"},
        {{"-sns", "--suppress-nst"}, 0, N, kDecode},
        {{"-nth", "--no-speech-thold"}, 1, N, kDecode},
        {{"-ng", "--no-gpu"}, 0, L, "which device a model runs on is loch's placement"},
        {{"-dev", "--device"}, 1, L, "which device a model runs on is loch's placement"},
        {{"-fa", "--flash-attn"}, 0, L, "set whisper.flash_attention, so that the planner sees it"},
        {{"-nfa", "--no-flash-attn"}, 0, L, "set whisper.flash_attention, so that the planner sees it"},
        {{"-nlp", "--no-language-probabilities"}, 0, N, kOutput},
        {{"--vad"},
         0,
         R,
         "voice activity detection loads a VAD model beside the weights, which loch does not plan"},
        {{"-vm", "--vad-model"}, 1, R, "a VAD model is weights loch does not plan"},
        {{"-vt", "--vad-threshold"}, 1, N, kVadOnly},
        {{"-vspd", "--vad-min-speech-duration-ms"}, 1, N, kVadOnly},
        {{"-vsd", "--vad-min-silence-duration-ms"}, 1, N, kVadOnly},
        {{"-vmsd", "--vad-max-speech-duration-s"}, 1, N, kVadOnly},
        {{"-vp", "--vad-speech-pad-ms"}, 1, N, kVadOnly},
        {{"-vo", "--vad-samples-overlap"}, 1, N, kVadOnly},
    }};

}  // namespace whisper_server_table

const FlagTable& whisper_server() {
    return whisper_server_table::kTable;
}

}  // namespace loch::engines::flags
