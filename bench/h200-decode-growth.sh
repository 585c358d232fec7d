#!/usr/bin/env bash
# Does a llama-server process grow on the GPU once it generates tokens? (found by bench/h200-vision.sh: the
# text-only baselines grew 104-116 MiB after their first chat request, where the issue-26 sweep had measured
# prompt processing only.) For three shapes, the pinned CUDA llama-server as loch starts it (no --no-warmup):
# nvidia-smi's per-process figure after load, after a long prompt with one generated token, and after 128
# generated tokens; beside loch's plan for the same settings (`loch plan --json`). Then `loch serve` with
# the vision model on nvidia:0: its reservation against nvidia-smi after image requests.
# Carried in devcarry/: llama.cpp.bundle, loch, loch-synth, lib/. Results: $OUT/decode-growth.txt.
set -uo pipefail
R=$PWD
G=$R/build-gpu
OUT=${OUT:-$R/h200-out}
W=$G/decode
mkdir -p "$OUT" "$W"
bash "$R/bench/h200.sh" build 0 >"$OUT/decode-build.txt" 2>&1
B=$G/llama.cpp/build/bin
export LD_LIBRARY_PATH=$B:$R/devcarry/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
S=$R/devcarry/loch-synth
T=$OUT/decode-growth.txt
: >"$T"
used() { nvidia-smi --query-compute-apps=pid,used_memory --format=csv,noheader,nounits | awk -F', ' -v p="$1" '$1==p{print $2}'; }
prompt() { python3 -c "import sys; print(' '.join(['ab'] * int(sys.argv[1])))" "$1"; }
for shape in "llama-3.1-8b|--preset llama-3.1-8b --quant f16" "qwen2.5-7b|--preset qwen2.5-7b --quant q4_k_m" \
             "t4096|--arch llama --layers 2 --embd 4096 --heads 16 --ff 2048 --vocab 1000 --ctx 4096 --weights zeros"; do
  IFS='|' read -r name sargs <<<"$shape"
  # shellcheck disable=SC2086
  [ -s "$W/$name.gguf" ] || "$S" $sargs --out "$W/$name.gguf" >/dev/null
  for fa in on off; do
    "$B/llama-server" -m "$W/$name.gguf" --host 127.0.0.1 --port 18795 -c 4096 -np 1 -ngl 999 -fa $fa --fit off \
      -lv 4 --no-webui >"$W/$name-$fa.log" 2>&1 &
    pid=$!
    for _ in $(seq 600); do curl -sf http://127.0.0.1:18795/health >/dev/null && break; sleep 0.2; done
    a=$(used $pid)
    curl -s http://127.0.0.1:18795/completion -d '{"prompt":"'"$(prompt 1500)"'","n_predict":1}' >/dev/null
    b=$(used $pid)
    curl -s http://127.0.0.1:18795/completion -d '{"prompt":"hello","n_predict":128,"ignore_eos":true}' >/dev/null
    c=$(used $pid)
    curl -s http://127.0.0.1:18795/v1/chat/completions -d '{"max_tokens":16,"messages":[{"role":"user","content":"hi"}]}' >/dev/null
    d=$(used $pid)
    kill $pid; wait $pid 2>/dev/null
    plan=$("$R/devcarry/loch" plan "$W/$name.gguf" --ctx 4096 --device cuda0 --flash-attn $fa --json 2>/dev/null \
      | python3 -c 'import json,sys; j=json.load(sys.stdin); d=[x for x in j["devices"] if x["device"]!="cpu"][0]; print(round(d["total_bytes"]/2**20))' 2>/dev/null)
    printf '%s fa=%s loaded=%s after_prompt=%s after_128_tokens=%s after_chat=%s plan_mib=%s\n' "$name" $fa "$a" "$b" "$c" "$d" "$plan" | tee -a "$T"
  done
done
OUT=$OUT bash "$R/bench/h200-vision.sh" serve >"$OUT/vision-serve.txt" 2>&1
cat "$OUT/vision.txt" >>"$T"
