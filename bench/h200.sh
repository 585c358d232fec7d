#!/usr/bin/env bash
# The GPU half of issue 8, on the lent H200 (`device` tool), from the repository root there:
#   1. builds the pinned llama.cpp with CUDA into build-gpu/ (docs/engine-build.md), once per warm machine;
#   2. `admission-scenario`: loch serve with models sized against the GPU's empty capacity;
#   3. `plan-accuracy --mode gpu`: the reservation rule vs nvidia-smi after a long prompt, continuing from
#      build-gpu/h200.jsonl (--skip-done) until DEADLINE seconds;
#   4. `sweep`: issue 26's settings sweep (plan-accuracy --sweep: shapes x ubatch x flash attention x cache type
#      x parallel x context, pairwise covered; truth = the per-process peak sampled while every slot
#      processes a prompt filling its whole context), continuing from build-gpu/sweep.jsonl.
# Carried in devcarry/: llama.cpp.bundle, loch, plan-accuracy, admission-scenario, lib/libprometheus-cpp-core.so.1.0
# (built here; besides that library they need only
# glibc). Results go to $OUT (or ./h200-out).
#   bash bench/h200.sh [scenario|accuracy|sweep|all] [SECONDS]    (SECONDS: the whole call's budget, default 540)
set -euo pipefail
WHAT=${1:-all}
END=$(( $(date +%s) + ${2:-540} ))
R=$PWD
G=$R/build-gpu
OUT=${OUT:-$R/h200-out}
mkdir -p "$G" "$OUT"
B=$G/llama.cpp/build/bin
if [ ! -x "$B/llama-server" ]; then
  t0=$(date +%s)
  rm -rf "$G/llama.cpp"
  git clone -q "$R/devcarry/llama.cpp.bundle" "$G/llama.cpp"
  cmake -S "$G/llama.cpp" -B "$G/llama.cpp/build" -G Ninja -DCMAKE_BUILD_TYPE=Release -DGGML_CUDA=ON \
    -DCMAKE_CUDA_ARCHITECTURES=90 -DGGML_NATIVE=OFF -DLLAMA_CURL=OFF -DLLAMA_BUILD_TESTS=OFF \
    -DLLAMA_BUILD_EXAMPLES=OFF -DLLAMA_USE_PREBUILT_UI=OFF -DLLAMA_BUILD_UI=OFF >"$OUT/build.log" 2>&1
  cmake --build "$G/llama.cpp/build" -j"$(nproc)" --target llama-server llama-fit-params >>"$OUT/build.log" 2>&1
  echo "llama.cpp CUDA build: $(( $(date +%s) - t0 )) s"
fi
# loch links prometheus-cpp's core shared (Debian ships no static archive): carried in devcarry/lib.
export LD_LIBRARY_PATH=$B:$R/devcarry/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
nvidia-smi --query-gpu=name,memory.total,memory.used,driver_version --format=csv
if [ "$WHAT" = scenario ] || [ "$WHAT" = all ]; then
  t0=$(date +%s)
  timeout "${SCENARIO_S:-240}" "$R/devcarry/admission-scenario" --loch "$R/devcarry/loch" --engine-dir "$B" --device nvidia:0 \
    --work "$G/scenario" --json "$OUT/scenario.json" 2>&1 | tee "$OUT/scenario.txt" || true
  cp -f "$G"/scenario/loch-scenario.log "$OUT/" 2>/dev/null || true
  # How loch placed the engines: the probe's ordinal in --device, NVML's order for CUDA.
  find "$G/scenario" -name '*.log' -path '*logs*' -exec grep -h -o -- '--device [A-Za-z0-9,]*' {} + 2>/dev/null \
    | sort | uniq -c > "$OUT/device-args.txt" || true
  echo "scenario: $(( $(date +%s) - t0 )) s"
fi
if [ "$WHAT" = accuracy ] || [ "$WHAT" = all ]; then
  touch "$G/h200.jsonl"
  DEADLINE=$(( END - $(date +%s) - 90 ))   # the last case may take up to ~90 s (a 70B at 128k)
  "$R/devcarry/plan-accuracy" --mode gpu --server "$B/llama-server" --fit-params "$B/llama-fit-params" \
    --work "$G/models" --prompt-ubatches 3 --jsonl "$G/h200.jsonl" --skip-done "$G/h200.jsonl" \
    --markdown "$OUT/h200.md" --deadline-s "$DEADLINE" --threads 8 ${CASES:+--cases "$CASES"} \
    >"$OUT/accuracy.txt" 2>&1 || true
  cp -f "$G/h200.jsonl" "$OUT/"
  tail -5 "$OUT/accuracy.txt"
fi
if [ "$WHAT" = sweep ]; then
  touch "$G/sweep.jsonl"
  DEADLINE=$(( END - $(date +%s) - 100 ))   # the last case may take up to ~100 s (the 70B, 8 slots)
  "$R/devcarry/plan-accuracy" --mode gpu --sweep --server "$B/llama-server" --fit-params "$B/llama-fit-params" \
    --work "$G/models" --full-slots --jsonl "$G/sweep.jsonl" --skip-done "$G/sweep.jsonl" \
    --markdown "$OUT/sweep.md" --deadline-s "$DEADLINE" --threads 8 ${CASES:+--cases "$CASES"} \
    >"$OUT/sweep.txt" 2>&1 || true
  cp -f "$G/sweep.jsonl" "$OUT/"
  tail -8 "$OUT/sweep.txt"
fi
