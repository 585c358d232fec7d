// The whisper planner against whisper.cpp's own figures: the buffers whisper-server printed for each release
// shape on this machine's CPU (FA on and off), and the per-process device memory nvidia-smi showed on the
// H200 after a beam-5 transcription (bench/results/h200-2026-12-02-whisper.md). Never under, close above.
#include <gtest/gtest.h>

#include <string>

#include "plan/whisper.hpp"

namespace loch::plan {
namespace {

gguf::WhisperHparams shape(int state, int heads, int enc, int dec, int mels = 80, int vocab = 51865) {
    gguf::WhisperHparams hp;
    hp.n_vocab = vocab;
    hp.n_audio_state = hp.n_text_state = state;
    hp.n_audio_head = hp.n_text_head = heads;
    hp.n_audio_layer = enc;
    hp.n_text_layer = dec;
    hp.n_mels = mels;
    return hp;
}

struct Logged {
    const char* name;
    gguf::WhisperHparams hp;
    double weights, kv_self, kv_cross, kv_pad, conv, encode, encode_nfa, cross, decode;  // MB, CPU log
    double h200_fa_mib, h200_nfa_mib;  // nvidia-smi per process after greedy + beam 5
};

const Logged kLogged[] = {
    {"tiny", shape(384, 6, 4, 4), 77.11, 3.15, 9.44, 2.36, 13.21, 17.72, 64.81, 3.89, 95.91, 890, 958},
    {"base", shape(512, 8, 6, 6), 147.37, 6.29, 18.87, 3.15, 16.28, 23.09, 85.88, 4.66, 96.37, 1000, 1088},
    {"small", shape(768, 12, 12, 12), 487.01, 18.87, 56.62, 4.72, 22.42, 33.85, 128.02, 6.20, 97.28, 1466,
     1598},
    {"medium", shape(1024, 16, 24, 24), 1533.14, 50.33, 150.99, 6.29, 28.57, 44.60, 170.17, 7.73, 98.20, 2786,
     2962},
    {"large-v3", shape(1280, 20, 32, 32, 128, 51866), 3094.36, 83.89, 251.66, 7.86, 36.15, 55.35, 212.31,
     9.27, 99.12, 4620, 4840},
    {"large-v3-turbo", shape(1280, 20, 32, 4, 128, 51866), 1623.92, 10.49, 31.46, 7.86, 36.15, 55.35, 212.31,
     9.27, 99.12, 2518, 2738},
};

std::uint64_t part(const WhisperPlan& p, const std::string& prefix) {
    for (const auto& x : p.parts)
        if (x.name.rfind(prefix, 0) == 0) return x.bytes;
    ADD_FAILURE() << "no part " << prefix;
    return 0;
}

// Never under what whisper-server printed, and within 2 % + 0.1 MB above it.
void close_above(std::uint64_t planned, double logged_mb, const std::string& what) {
    const double mb = double(planned) / 1e6;
    EXPECT_GE(mb + 0.005, logged_mb) << what;
    EXPECT_LE(mb, logged_mb * 1.02 + 0.1) << what;
}

TEST(WhisperPlan, EveryBufferOfEveryReleaseShapeMatchesWhisperServersOwnLines) {
    for (const auto& l : kLogged) {
        const auto fa = plan_whisper(l.hp, {.gpu = false, .flash_attention = true, .max_decoders = 1});
        const auto nfa = plan_whisper(l.hp, {.gpu = false, .flash_attention = false, .max_decoders = 1});
        const std::string n = l.name;
        close_above(fa.weights, l.weights, n + " weights");
        close_above(part(fa, "kv self"), l.kv_self, n + " kv self");
        close_above(part(fa, "kv cross"), l.kv_cross, n + " kv cross");
        close_above(part(fa, "kv pad"), l.kv_pad, n + " kv pad");
        close_above(part(fa, "compute (conv)"), l.conv, n + " conv");
        close_above(part(fa, "compute (encode)"), l.encode, n + " encode");
        close_above(part(nfa, "compute (encode)"), l.encode_nfa, n + " encode without flash attention");
        close_above(part(fa, "compute (cross)"), l.cross, n + " cross");
        close_above(part(fa, "compute (decode)"), l.decode, n + " decode");
    }
}

TEST(WhisperPlan, TheDecoderKvIsPlannedForTheReallocationAtDecodersPlusTwo) {
    const auto& tiny = kLogged[0];
    const auto one = plan_whisper(tiny.hp, {.max_decoders = 1});
    const auto five = plan_whisper(tiny.hp, {.max_decoders = 5});
    EXPECT_EQ(part(five, "kv self"), 7 * part(one, "kv self"));
    EXPECT_EQ(five.kv_self_at_start, part(one, "kv self"));
    const auto two_proc = plan_whisper(tiny.hp, {.max_decoders = 5, .processors = 2});
    EXPECT_EQ(two_proc.kv, 2 * five.kv);
    EXPECT_EQ(two_proc.compute, 2 * five.compute);
    EXPECT_EQ(two_proc.weights, five.weights);  // weights are shared by the processors
}

TEST(WhisperPlan, OnTheH200TheDeviceTotalAfterBeamSearchIsNeverUnderNvidiaSmi) {
    for (const auto& l : kLogged)
        for (const bool fa : {true, false}) {
            const auto p = plan_whisper(l.hp, {.gpu = true, .flash_attention = fa, .max_decoders = 5});
            const double planned_mib = double(p.total) / (1 << 20);
            const double measured = fa ? l.h200_fa_mib : l.h200_nfa_mib;
            EXPECT_GE(planned_mib, measured) << l.name << (fa ? " fa" : " nfa");
            EXPECT_LE(planned_mib, measured * 1.06) << l.name << (fa ? " fa" : " nfa");
        }
}

TEST(WhisperPlan, DecodedAudioGrowsWithItsLength) {
    EXPECT_EQ(whisper_audio_bytes(1000, 0, 80), 1000u);
    // One second: 16000 f32 samples + 100 frames × 80 mels × 4 B.
    EXPECT_EQ(whisper_audio_bytes(0, 1.0, 80), 64000u + 32000u);
    EXPECT_EQ(whisper_audio_bytes(0, 3600.0, 128), 3600u * (64000u + 51200u));
}

}  // namespace
}  // namespace loch::plan
