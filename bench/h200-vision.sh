#!/usr/bin/env bash
# Issue 29's vision projector on the lent H200 (`device` tool), from the repository root there: the pinned
# llama.cpp built with CUDA (bench/h200.sh build), then for projector shapes x flash attention, the pinned
# llama-server with a synthetic text model on the GPU, with and without `--mmproj`: clip.cpp's own lines (its
# backend, weights, compute buffer) and the process's GPU memory (nvidia-smi) after a text prompt of about
# the image's tokens and after an image request — the projector's real cost on the device, to hold against
# plan/projector.hpp's figure (weights + compute + ggml-cuda's pool). Then `loch serve` with the vision model
# on nvidia:0: its reservation against nvidia-smi after image requests.
# Carried in devcarry/: llama.cpp.bundle, loch, loch-synth, lib/libprometheus-cpp-core.so.1.0. Results: $OUT.
#   bash bench/h200-vision.sh [all|serve]     (serve: only the loch serve part)
set -uo pipefail
WHAT=${1:-all}
R=$PWD
G=$R/build-gpu
OUT=${OUT:-$R/h200-out}
W=$G/vision
mkdir -p "$OUT" "$W"
bash "$R/bench/h200.sh" build 0 >"$OUT/vision-build.txt" 2>&1  # the CUDA llama.cpp, once per machine
B=$G/llama.cpp/build/bin
export LD_LIBRARY_PATH=$B:$R/devcarry/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
S=$R/devcarry/loch-synth
T=$OUT/vision.txt
: >"$T"
for e in 4096 1024; do
  [ -s "$W/t$e.gguf" ] || "$S" --arch llama --layers 2 --embd $e --heads 16 --ff 2048 --vocab 1000 --ctx 4096 \
    --weights zeros --out "$W/t$e.gguf" >/dev/null
done
IMG=$(base64 -w0 "$R/tests/data/photo-1024x768.png")
used() { nvidia-smi --query-compute-apps=pid,used_memory --format=csv,noheader,nounits | awk -F', ' -v p="$1" '$1==p{print $2}'; }
# A prompt of about N tokens for the text baseline (the synthetic vocabulary: about a token per character).
words() { python3 -c "import sys; print(' '.join(['ab'] * int(sys.argv[1])))" "$1"; }
run_case() {  # name text_embd fa mmproj-or-empty tokens
  local name=$1 e=$2 fa=$3 mm=$4 tokens=$5 port=18790 log=$W/$1-$3.log
  local args=(-m "$W/t$e.gguf" --host 127.0.0.1 --port $port -c 4096 -np 1 -ngl 99 -fa "$fa" --fit off -lv 4 --no-webui)
  [ -n "$mm" ] && args+=(--mmproj "$mm")
  "$B/llama-server" "${args[@]}" >"$log" 2>&1 &
  local pid=$!
  for _ in $(seq 300); do curl -sf "http://127.0.0.1:$port/health" >/dev/null && break; sleep 0.2; done
  local loaded; loaded=$(used $pid)
  local body
  if [ -n "$mm" ]; then
    body='{"max_tokens":4,"messages":[{"role":"user","content":[{"type":"text","text":"Caption."},{"type":"image_url","image_url":{"url":"data:image/png;base64,'$IMG'"}}]}]}'
  else
    body='{"max_tokens":4,"messages":[{"role":"user","content":"'"$(words "$tokens")"'"}]}'
  fi
  local usage; usage=$(curl -s "http://127.0.0.1:$port/v1/chat/completions" -H 'Content-Type: application/json' -d "$body" \
    | python3 -c 'import json,sys; print(json.load(sys.stdin).get("usage",{}).get("prompt_tokens"))' 2>/dev/null)
  local after; after=$(used $pid)
  kill $pid; wait $pid 2>/dev/null
  printf '%s fa=%s mmproj=%s prompt_tokens=%s gpu_used_loaded_mib=%s gpu_used_after_mib=%s\n' \
    "$name" "$fa" "${mm:+yes}" "$usage" "$loaded" "$after" | tee -a "$T"
  grep -E "CLIP using|load_hparams: model size|reserve_compute_meta:.*compute buffer|warmup: flash" "$log" | sed 's/^/    /' | tee -a "$T"
}
CASES=(
  "llava-1.5|4096|--mmproj llava-1.5"
  "w768-224-l12|1024|--mmproj llava-1.5 --image-size 224 --embd 768 --heads 12 --ff 3072 --layers 12"
  "w1024-336-l6|1024|--mmproj llava-1.5 --layers 6"
  "w1280-448-l4|1024|--mmproj llava-1.5 --image-size 448 --embd 1280 --heads 16 --ff 5120 --layers 4"
)
[ "$WHAT" = serve ] && CASES=("llava-1.5|4096|--mmproj llava-1.5")
for c in "${CASES[@]}"; do
  IFS='|' read -r name e margs <<<"$c"
  mm=$W/$name.gguf
  # shellcheck disable=SC2086
  [ -s "$mm" ] || "$S" $margs --text-embd "$e" --out "$mm" >/dev/null
  [ "$WHAT" = serve ] && continue
  for fa in on off; do
    run_case "$name" "$e" "$fa" "$mm" 0
    tok=$(grep -o 'prompt_tokens=[0-9]*' "$T" | tail -1 | cut -d= -f2)
    run_case "$name-text" "$e" "$fa" "" "${tok:-600}"
  done
done
# loch serve with the vision model on the GPU: its reservation vs the engine's use after image requests.
cat >"$W/loch.yaml" <<YAML
port: 18791
state_dir: $W/state
log_dir: $W/logs
engine_dir: $B
models:
  - name: captioner
    path: $W/t4096.gguf
    devices: [nvidia:0]
    args: {ctx: 4096, parallel: 2, mmproj: $W/llava-1.5.gguf}
YAML
"$R/devcarry/loch" serve -c "$W/loch.yaml" >"$OUT/vision-serve.log" 2>&1 &
SERVE=$!
for _ in $(seq 100); do curl -sf http://127.0.0.1:18791/health >/dev/null && break; sleep 0.2; done
for i in 1 2 3; do
  curl -s http://127.0.0.1:18791/v1/chat/completions -H 'Content-Type: application/json' \
    -d '{"model":"captioner","max_tokens":4,"messages":[{"role":"user","content":[{"type":"text","text":"Caption."},{"type":"image_url","image_url":{"url":"data:image/png;base64,'$IMG'"}}]}]}' \
    | head -c 200 | tee -a "$T"; echo | tee -a "$T"
done
echo "== loch ps / reservation vs nvidia-smi" | tee -a "$T"
"$R/devcarry/loch" ps --url 127.0.0.1:18791 | tee -a "$T"
curl -s -X POST http://127.0.0.1:18791/loch/plan -d '{"model":"captioner"}' | python3 -c '
import json,sys; j=json.load(sys.stdin); print(json.dumps(j["status"].get("footprint"), indent=1)); print("measured", json.dumps(j["status"].get("measured")))' | tee -a "$T"
nvidia-smi --query-compute-apps=pid,used_memory --format=csv | tee -a "$T"
kill $SERVE; wait $SERVE 2>/dev/null
cp -f "$OUT/vision-serve.log" "$OUT/" 2>/dev/null || true
