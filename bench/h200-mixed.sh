#!/usr/bin/env bash
# Issue 33's GPU half on the lent H200 (`device` tool), from the repository root there, carrying devcarry-mix/
# (made by `bash bench/h200-mixed.sh --pack` here: the pinned llama.cpp's source without its history, the
# stable-diffusion.cpp sdist, stripped loch, loch-synth and mixed-trace, and Debian 12's glibc with its loader —
# the lent machine's glibc is older than the one loch is built against, so loch runs through the carried
# loader; the engines it starts are built there and use the machine's own). Steps:
#   build    the pinned llama-server and sd-server with CUDA (once per warm machine, in /tmp/h200-mix);
#   restore  bench/conversation-restore.sh with an 8B-shaped model on nvidia:0;
#   restore70 the same with a 70B shape (q4_k_m) and a ~16k-token conversation;
#   floor    bench/swap-floor.sh with the same model;
#   readahead bench/read-ahead.sh with an 8B-shaped q8_0 model whose weights are written (not sparse);
#   trace    mixed-trace --device nvidia:0 (a captioner and a chat model of 8B shape, Flux-tiny images;
#            TRACE=two-people|image-burst for the other traces, SD=0 to build no sd-server for a trace without).
#   bash bench/h200-mixed.sh [build|restore|restore70|floor|readahead|trace|all]      results in $OUT (default ./h200-mix-out)
set -euo pipefail
R=$(pwd)
C=$R/devcarry-mix
if [ "${1:-}" = --pack ]; then
  rm -rf "$C"; mkdir -p "$C/lib" "$C/real"
  tar -C /var/cache/loch/llama.cpp-src --exclude=./build --exclude=./models --exclude=./docs --exclude=./.git \
    --exclude=./media --exclude=./gguf-py --exclude=./benches --exclude=./tools/server/webui \
    --exclude='./tools/server/public*' -cJf "$C/llama.cpp-src.tar.xz" .
  (cd "$C" && pip download -q --no-deps --no-binary :all: stable-diffusion-cpp-python==0.4.7)
  for b in loch loch-synth mixed-trace; do strip -o "$C/real/$b" "$R/build/bin/$b"; done
  for l in libprometheus-cpp-core.so.1.0 libstdc++.so.6 libm.so.6 libc.so.6 libgcc_s.so.1; do
    cp -L "/lib/x86_64-linux-gnu/$l" "$C/lib/"; done
  cp -L /lib64/ld-linux-x86-64.so.2 "$C/lib/"
  du -sh "$C"; exit 0
fi
WHAT=${1:-all}
OUT=${OUT:-$R/h200-mix-out}
W=/tmp/h200-mix
B=$W/bin
mkdir -p "$OUT" "$B"
# SD=0 builds llama-server alone (a trace without images: TRACE=two-people).
if [ ! -x "$W/llama/build/bin/llama-server" ] || { [ "${SD:-1}" = 1 ] && [ ! -x "$W/sd/build/bin/sd-server" ]; }; then
  t0=$(date +%s)
  mkdir -p "$W/llama" "$W/sdsrc"
  tar -xJf "$C/llama.cpp-src.tar.xz" -C "$W/llama"
  tar -xzf "$C"/stable_diffusion_cpp_python-0.4.7.tar.gz -C "$W/sdsrc"
  (cmake -S "$W/llama" -B "$W/llama/build" -G Ninja -DCMAKE_BUILD_TYPE=Release -DGGML_CUDA=ON \
     -DCMAKE_CUDA_ARCHITECTURES=90 -DGGML_NATIVE=OFF -DLLAMA_CURL=OFF -DLLAMA_BUILD_TESTS=OFF \
     -DLLAMA_BUILD_EXAMPLES=OFF -DLLAMA_BUILD_UI=OFF -DLLAMA_USE_PREBUILT_UI=OFF >"$OUT/llama-build.log" 2>&1 &&
   cmake --build "$W/llama/build" -j 10 --target llama-server llama-fit-params >>"$OUT/llama-build.log" 2>&1) &
  SRC=$(echo "$W"/sdsrc/stable_diffusion_cpp_python-*/vendor/stable-diffusion.cpp)
  [ "${SD:-1}" = 1 ] && (cmake -S "$SRC" -B "$W/sd/build" -G Ninja -DCMAKE_BUILD_TYPE=Release -DSD_CUDA=ON -DCMAKE_CUDA_ARCHITECTURES=90 \
     -DGGML_NATIVE=OFF -DSD_SERVER_BUILD_FRONTEND=OFF -DSD_WEBP=OFF -DSD_WEBM=OFF >"$OUT/sd-build.log" 2>&1 &&
   cmake --build "$W/sd/build" -j 8 --target sd-server >>"$OUT/sd-build.log" 2>&1) &
  wait
  echo "builds: $(( $(date +%s) - t0 )) s"
fi
for b in loch loch-synth mixed-trace; do
  printf '#!/bin/sh\nexec "%s/lib/ld-linux-x86-64.so.2" --library-path "%s/lib" "%s/real/%s" "$@"\n' "$C" "$C" "$C" "$b" > "$B/$b"
  chmod +x "$B/$b"
done
ln -sf "$W/llama/build/bin/llama-server" "$W/llama/build/bin/llama-fit-params" "$B/"
[ -x "$W/sd/build/bin/sd-server" ] && ln -sf "$W/sd/build/bin/sd-server" "$B/"
export LD_LIBRARY_PATH=$W/llama/build/bin
nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader | tee "$OUT/gpu.txt"
"$B/loch" --version 2>&1 | head -1 | tee "$OUT/loch-version.txt" || true
[ "$WHAT" = build ] && exit 0
EIGHT_B="--preset llama-3.1-8b --type f16 --weights zeros --ctx 32768"
if [ "$WHAT" = restore ] || [ "$WHAT" = all ]; then
  BIN=$B DEVICE=nvidia:0 BUDGET=60GiB OTHER_MEMORY=50GiB MODEL_ARGS="$EIGHT_B" \
    timeout 400 bash "$R/bench/conversation-restore.sh" "${TOKENS:-24300}" 2>&1 | tee "$OUT/restore.txt" || true
fi
if [ "$WHAT" = restore70 ]; then
  # A 70B shape (q4_k_m, ~40 GiB) at a 16k-token conversation: the restore's KV grows 2.5x over the 8B's per
  # token while the prefill it saves grows ~9x, so this is the regime the restore is for (docs/performance.md).
  BIN=$B DEVICE=nvidia:0 BUDGET=70GiB OTHER_MEMORY=60GiB \
    MODEL_ARGS="--preset llama-3.1-70b --type q4_k_m --weights zeros --ctx 32768" \
    timeout 430 bash "$R/bench/conversation-restore.sh" "${TOKENS:-24300}" 2>&1 | tee "$OUT/restore70.txt" || true
fi
if [ "$WHAT" = floor ] || [ "$WHAT" = all ]; then
  BIN=$B DEVICE=nvidia:0 BUDGET=40GiB OTHER_MEMORY=30GiB MODEL_ARGS="$EIGHT_B" ROUNDS=${FLOOR_ROUNDS:-5} \
    timeout 300 bash "$R/bench/swap-floor.sh" 2>&1 | tee "$OUT/floor.txt" || true
fi
if [ "$WHAT" = readahead ] || [ "$WHAT" = all ]; then
  BIN=$B DEVICE=nvidia:0 BUDGET=40GiB OTHER_MEMORY=30GiB ROUNDS=3 OTHER_TOKENS=3000 \
    MODEL_ARGS="--preset llama-3.1-8b --type q8_0 --weights small --ctx 8192" \
    timeout 400 bash "$R/bench/read-ahead.sh" 2>&1 | tee "$OUT/readahead.txt" || true
fi
if [ "$WHAT" = trace ] || [ "$WHAT" = all ]; then
  timeout 560 "$B/mixed-trace" --loch "$B/loch" --device nvidia:0 --work "$W/trace" --seconds "${SECONDS_PER:-60}" \
    --trace "${TRACE:-mixed}" --rounds "${ROUNDS:-2}" --threads 8 --image-side 512 --chat-gap 3 \
    --chat "--preset llama-3.1-8b --type q8_0 --weights zeros --ctx 8192" \
    --captioner "--preset qwen3-8b --type q8_0 --weights zeros --ctx 8192" \
    --json "$OUT/trace.json" 2>&1 | tee "$OUT/trace.txt" || true
  cp "$W"/trace/loch-*.log "$W"/trace/round-* "$OUT/" 2>/dev/null || true
fi
