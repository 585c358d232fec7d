#!/usr/bin/env bash
# Issue 50's CUDA half on a lent GPU (the `device` tool): the pinned engines built for the GPU by the setup
# script's own build step (scripts/engines/build.sh, which setup.sh calls per engine and backend) from
# carried sources — the lent machine reaches no package registry — then `loch serve` with the engines it
# made, laid out as setup.sh lays them (build/bin/cuda/ + engine-build.json), answering a chat, an image and
# a transcription on the GPU.
#   here:   bash bench/gpu-engines.sh --pack    devcarry-gpu/: the three sources as setup.sh unpacks them,
#           stripped loch and loch-synth with Debian 12's glibc and loader (the lent machine's glibc is
#           older: loch runs through the carried loader; the engines are built there and use its own)
#   there:  bash bench/gpu-engines.sh build     llama-server, sd-server and whisper-server for CUDA (at once)
#           bash bench/gpu-engines.sh serve     loch serve: chat, image, transcription; nvidia-smi beside
# Results (build logs and times, answers, loch's log) in $OUT (default ./gpu-engines-out).
set -euo pipefail
R=$(pwd)
C=$R/devcarry-gpu
if [[ ${1:-} == --pack ]]; then
  CACHE=${LOCH_CACHE_DIR:-/var/cache/loch}
  rm -rf "$C" && mkdir -p "$C/lib" "$C/real"
  tar -C "$CACHE/llama.cpp-src" --exclude=./.git --exclude='./build*' --exclude=./models --exclude=./docs \
    --exclude=./media --exclude=./gguf-py --exclude=./benches --exclude=./tools/server/webui \
    --exclude='./tools/server/public*' -cJf "$C/llama.tar.xz" .
  git -C "$CACHE/llama.cpp-src" rev-parse --short=7 HEAD >"$C/llama.version"
  tar -C "$CACHE/src/stable-diffusion-cpp-python-0.4.7/src" --exclude=./.git --exclude='./build*' \
    --exclude=./docs --exclude=./assets -cJf "$C/sd.tar.xz" .
  tar -C "$CACHE/src/pywhispercpp-1.5.1/src" --exclude=./.git --exclude='./build*' --exclude=./models \
    --exclude=./samples --exclude=./examples/wchess -cJf "$C/whisper.tar.xz" .
  for b in loch loch-synth; do strip -o "$C/real/$b" "$R/build/bin/$b"; done
  for l in libprometheus-cpp-core.so.1.0 libstdc++.so.6 libm.so.6 libc.so.6 libgcc_s.so.1; do
    cp -L "/lib/x86_64-linux-gnu/$l" "$C/lib/"
  done
  cp -L /lib64/ld-linux-x86-64.so.2 "$C/lib/"
  du -sh "$C"
  exit 0
fi
WHAT=${1:-serve}
OUT=${OUT:-$R/gpu-engines-out}
W=${GPU_WORK:-$R/gpu-work}  # in the tree, ignored: the device keeps it between calls, so a build resumes
E=$W/bin/cuda  # as setup.sh lays out build/bin/cuda/
mkdir -p "$OUT" "$E" "$W/src"
ARCH=$(nvidia-smi --query-gpu=compute_cap --format=csv,noheader | head -1 | tr -d ' .')
nvidia-smi --query-gpu=name,memory.total,driver_version,compute_cap --format=csv,noheader | tee "$OUT/gpu.txt"
nvcc --version | tail -2 >"$OUT/nvcc.txt" || true

build() {  # engine, jobs
  mkdir -p "$W/src/$1"
  [[ -f $W/src/$1/.unpacked ]] || { tar -xJf "$C/$1.tar.xz" -C "$W/src/$1" && touch "$W/src/$1/.unpacked"; }
  local t0=$SECONDS
  JOBS=$2 BUILD_DIR=$W/build-$1 bash "$R/scripts/engines/build.sh" "$1" cuda "$W/src/$1" "$W/out-$1" "$ARCH" \
    >"$OUT/build-$1.txt" 2>&1 || { cp "$W/build-$1.log" "$OUT/" 2>/dev/null; tail -20 "$OUT/build-$1.txt"; return 1; }
  echo "$1 for cuda (sm_$ARCH): $((SECONDS - t0)) s with $2 jobs on $(nproc) cores" | tee -a "$OUT/build-times.txt"
  cp "$W/out-$1"/* "$E/"
}
manifest() {  # what setup.sh writes beside each build folder
  local entries="" b
  for b in "$E"/*-server "$E"/llama-fit-params; do
    [[ -x $b ]] && entries+="${entries:+,}\"$(basename "$b")\": \"cuda build\""
  done
  printf '{"backend": "cuda", "targets": "%s", "engines": {%s}}\n' "$ARCH" "$entries" >"$E/engine-build.json"
}

case $WHAT in
  build)  # the engines named (default all three), at once, the cores shared among them
    shift
    engines=("$@")
    [[ $# -gt 0 ]] || engines=(llama sd whisper)
    jobs=$(($(nproc) / ${#engines[@]} + 1))
    for e in "${engines[@]}"; do build "$e" "$jobs" & done
    wait
    manifest ;;
  serve)
    B=$W/loch && mkdir -p "$B"
    for b in loch loch-synth; do
      printf '#!/bin/sh\nexec "%s/lib/ld-linux-x86-64.so.2" --library-path "%s/lib" "%s/real/%s" "$@"\n' "$C" "$C" "$C" "$b" >"$B/$b"
      chmod +x "$B/$b"
    done
    M=$W/models && mkdir -p "$M"
    "$B/loch-synth" --preset demo --out "$M/demo.gguf" >/dev/null
    for p in flux-tiny clip-l taef1; do "$B/loch-synth" --diffusion $p --out "$M/$p.gguf" >/dev/null; done
    "$B/loch-synth" --whisper whisper-base --out "$M/ggml-base.bin" >/dev/null
    python3 -c 'import wave; w = wave.open("'"$W"'/talk.wav", "wb"); w.setnchannels(1); w.setsampwidth(2); w.setframerate(16000); w.writeframes(bytes(32000 * 3))'
    cat >"$W/loch.yaml" <<YAML
port: 18090
state_dir: $W/state
engine_dir: $W/bin
models_dir: $M
models:
  - name: chat
    path: demo.gguf
  - name: flux
    engine: sd-server
    path: flux-tiny.gguf
    sd: {clip_l: clip-l.gguf, taesd: taef1.gguf, steps: 4}
  - name: whisper
    engine: whisper-server
    path: ggml-base.bin
YAML
    "$B/loch" devices >"$OUT/devices.txt" 2>&1 || true
    "$B/loch" serve -c "$W/loch.yaml" >"$OUT/loch.log" 2>&1 &
    pid=$!
    for _ in $(seq 1 100); do curl -sf 127.0.0.1:18090/health >/dev/null && break; sleep 0.2; done
    api=http://127.0.0.1:18090
    t0=$(date +%s.%N)
    curl -s "$api/v1/chat/completions" -H 'Content-Type: application/json' \
      -d '{"model":"chat","max_tokens":16,"messages":[{"role":"user","content":"Hello"}]}' >"$OUT/chat.json"
    t1=$(date +%s.%N)
    curl -s "$api/v1/images/generations" -H 'Content-Type: application/json' \
      -d '{"model":"flux","prompt":"a lighthouse","size":"512x512"}' | head -c 300 >"$OUT/image.json"
    t2=$(date +%s.%N)
    curl -s "$api/v1/audio/transcriptions" -F model=whisper -F file=@"$W/talk.wav" >"$OUT/speech.json"
    t3=$(date +%s.%N)
    nvidia-smi --query-compute-apps=pid,process_name,used_memory --format=csv >"$OUT/nvidia-smi.txt"
    curl -s "$api/loch/status" >"$OUT/status.json" || true
    awk -v a="$t0" -v b="$t1" -v c="$t2" -v d="$t3" \
      'BEGIN { printf "chat %.2f s, image %.2f s, speech %.2f s (cold starts included)\n", b - a, c - b, d - c }' |
      tee "$OUT/times.txt"
    for f in chat image speech; do echo "$f: $(head -c 200 "$OUT/$f.json")"; done
    cat "$OUT/nvidia-smi.txt"
    grep -E "started|argv|cuda" "$OUT/loch.log" | head -20
    kill -TERM $pid; wait $pid || true ;;
esac
