// plan/whisper — what a whisper.cpp engine holds on its device, from the model's hyper-parameters alone
// (whisper.cpp allocates everything at start; only the decoder KV grows, once, on beam search or a
// temperature fallback). Pure: no engine, no config. Figures fitted to whisper-server's own lines
// ("kv self size = … MB", "compute buffer (encode) = … MB"; MB of 10^6 bytes) on all six release shapes
// (docs/audio.md), S = width, L = decoder layers, A = 1500 encoder frames, T = 448 decoder tokens:
//
//   weights           the tensors whisper.cpp creates (gguf/whisper_file.hpp), in the file's types
//   KV self           4 B · L · S · ⌈T⌉₂₅₆       × (D + 2) once D > 1 decoders run (beam / best_of)
//   KV cross          4 B · L · S · ⌈A⌉₂₅₆;  KV pad 4 B · S · ⌈A⌉₂₅₆
//   conv              1.6 MB + 24000 B · S + 30200 B · mels
//   encode            1.6 MB + 28 B · A · S  (flash attention; without: 1.6 MB + (16 · A + A²/16) B · S)
//   cross             1.6 MB + 4 B · A · S
//   decode            1.6 MB + 4 B · vocab · T + 8 B · T · S
//   on a GPU          + 2 MB per compute buffer, + the CUDA context and ggml-cuda's pool (680 MiB), and
//                     without flash attention the encode buffer × 1.5 (the pool beside its attention)
//   processors (-p N) × N for the KV caches and the compute buffers
// Device memory does not grow with the audio's length (30 s windows); host memory does (the request's cost).
#pragma once

#include <cstdint>
#include <filesystem>
#include <string>
#include <vector>

#include "gguf/whisper_file.hpp"

namespace loch::plan {

// The process outside ggml's buffers (binary, HTTP server, threads): ~32 MiB RSS measured on the CPU.
inline constexpr std::uint64_t kWhisperProcessBytes = 48ull << 20;
// On a GPU: the CUDA context, cuBLAS workspace and ggml-cuda's pool in the process's device memory beyond
// the buffers whisper.cpp prints — 656…669 MiB per process on the H200 after a beam-5 transcription, for
// every release shape (bench/results/h200-2026-12-02-whisper.md).
inline constexpr std::uint64_t kWhisperGpuContextBytes = 680ull << 20;

struct WhisperOptions {
    bool gpu = false;
    bool flash_attention = true;     // whisper-server's default
    std::uint32_t max_decoders = 5;  // the most best_of / beam_size a request may use (whisper.cpp: ≤ 8)
    std::uint32_t processors = 1;
};

struct WhisperPart {
    std::string name;     // "weights", "kv self (5 decoders)", "compute (encode)", …
    std::uint64_t bytes;  // on the engine's device
    std::string formula;
};

struct WhisperPlan {
    std::vector<WhisperPart> parts;
    std::uint64_t weights = 0, kv = 0, compute = 0;
    std::uint64_t process = 0;           // process / GPU context
    std::uint64_t total = 0;             // on the device, the worst the options allow
    std::uint64_t kv_self_at_start = 0;  // what it prints at start (one decoder)
};

// The hyper-parameters of a whisper.cpp model file (its header; the tensors are checked too). Throws
// gguf::FormatError or std::system_error naming the file.
gguf::WhisperHparams read_whisper_hparams(const std::filesystem::path& model);

WhisperPlan plan_whisper(const gguf::WhisperHparams& hp, const WhisperOptions& o);

// One request's host memory beyond the engine: the upload, its audio decoded to f32 PCM at 16 kHz, and the
// log-mel spectrogram (mels × 100 frames/s × 4 B).
std::uint64_t whisper_audio_bytes(std::uint64_t upload_bytes, double seconds, std::int32_t n_mels);

}  // namespace loch::plan
