#!/usr/bin/env bash
# On the lent H200 (device tool): whisper-server built with CUDA from the PyPI sdist (the build command and its
# time for docs/engine-build.md), then each synthetic release shape loaded on the GPU — its own memory lines,
# nvidia-smi's per-process figure after start, after a greedy transcription and after a beam-5 one (the KV
# reallocation) — with and without flash attention. Compared with `loch plan` here by bench/whisper-accuracy.sh.
#   bash bench/h200-whisper.sh ["PRESETS"]  (devcarry-whisper/ holds the sdist, loch-synth and a WAV; results in $OUT)
set -euo pipefail
R=$(pwd)
C=$R/devcarry-whisper
OUT=${OUT:-$R/h200-whisper-out}
B=/tmp/whisper-h200
mkdir -p "$OUT" "$B"
if [[ ! -x $B/build/bin/whisper-server ]]; then
  tar xzf "$C/pywhispercpp-1.5.1.tar.gz" -C "$B"
  start=$SECONDS
  cmake -S "$B/pywhispercpp-1.5.1/whisper.cpp" -B "$B/build" -G Ninja -DCMAKE_BUILD_TYPE=Release -DGGML_CUDA=ON \
    -DCMAKE_CUDA_ARCHITECTURES=90 -DGGML_NATIVE=OFF -DWHISPER_BUILD_TESTS=OFF -DWHISPER_BUILD_EXAMPLES=ON \
    -DWHISPER_BUILD_SERVER=ON -DWHISPER_SDL2=OFF >"$OUT/configure.log" 2>&1
  cmake --build "$B/build" -j "$(nproc)" --target whisper-server >"$OUT/build.log" 2>&1
  echo "whisper-server CUDA build: $((SECONDS - start)) s on $(nproc) cores" | tee "$OUT/build-time.txt"
fi
nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader | tee "$OUT/gpu.txt"
used() { nvidia-smi --query-compute-apps=pid,used_memory --format=csv,noheader,nounits | awk -v p="$1" -F', ' '$1==p{print $2}'; }
: >"$OUT/measured.tsv"
for preset in ${1:-tiny base small medium large-v3 large-v3-turbo}; do
  "$C/loch-synth" --whisper "whisper-$preset" --out "$B/$preset.bin" >/dev/null
  for fa in fa nfa; do
    flag=$([[ $fa == nfa ]] && echo -nfa || echo -fa)
    log=$OUT/$preset-$fa.log
    "$B/build/bin/whisper-server" -m "$B/$preset.bin" $flag --port 18080 -t 8 >"$log" 2>&1 &
    pid=$!
    for _ in $(seq 1 300); do grep -q "listening" "$log" && break; sleep 0.2; done
    start=$(used $pid)
    curl -s 127.0.0.1:18080/inference -F file=@"$C/sine30.wav" >/dev/null
    greedy=$(used $pid)
    curl -s 127.0.0.1:18080/inference -F file=@"$C/sine30.wav" -F beam_size=5 >/dev/null
    beam=$(used $pid)
    printf '%s\t%s\t%s\t%s\t%s\n' "$preset" "$fa" "$start" "$greedy" "$beam" | tee -a "$OUT/measured.tsv"
    kill $pid; wait $pid 2>/dev/null || true
    grep -aE "total size|kv |compute buffer|CUDA0|error" "$log" >"$log.lines" || true
    mv "$log.lines" "$log"
  done
done
