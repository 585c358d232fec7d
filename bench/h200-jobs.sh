#!/usr/bin/env bash
# Issue 28 on the lent H200 (`device` tool), from the repository root there: a chat model loaded, then
# `loch run --memory 130GiB` of a CUDA program that allocates and touches 128 GiB — loch evicts the chat model
# first and nothing runs out of memory; while it runs, `loch ps` and `loch status` name the job with its measured
# use; a second job that can never fit is refused at once with the first named; a third that fits only after the
# first waits with its position, reason and ETA (--wait gives up: exit 75).
# Carried in devcarry/: llama.cpp.bundle, loch, loch-synth, lib/libprometheus-cpp-core.so.1.0 (built here).
# The chat model is synthesized there (Llama 3.1 8B shape, f16, zero weights: a sparse file). Results: $OUT.
#   bash bench/h200-jobs.sh
set -uo pipefail
R=$PWD
G=$R/build-gpu
OUT=${OUT:-$R/h200-out}
W=$G/jobs
mkdir -p "$OUT" "$W"
WHAT=build bash "$R/bench/h200.sh" build 0 >"$OUT/jobs-build.txt" 2>&1  # the CUDA llama.cpp, once per machine
B=$G/llama.cpp/build/bin
export LD_LIBRARY_PATH=$B:$R/devcarry/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
L=$R/devcarry/loch
URL=127.0.0.1:18700
say() { printf '\n== %s  [%s]\n' "$*" "$(date +%T)" | tee -a "$OUT/jobs.txt"; }

[ -s "$W/chat.gguf" ] || "$R/devcarry/loch-synth" --preset llama-3.1-8b --quant f16 --out "$W/chat.gguf" >/dev/null
cat >"$W/loch.yaml" <<YAML
port: 18700
state_dir: $W/state
log_dir: $W/logs
engine_dir: $B
models:
  - name: chat
    path: $W/chat.gguf
    devices: [nvidia:0]
    args: {ctx: 8192, parallel: 1}
YAML
# A job double on the GPU: cudaMalloc N GiB, touch it all (cudaMemset), hold it S seconds.
cat >"$W/alloc.py" <<'PY'
import ctypes, glob, sys, time
lib = sorted(glob.glob("/usr/local/cuda*/lib64/libcudart.so*") + glob.glob("/usr/lib/x86_64-linux-gnu/libcudart.so*"))[0]
cu = ctypes.CDLL(lib)
n = int(float(sys.argv[1]) * 2**30)
p = ctypes.c_void_p()
rc = cu.cudaMalloc(ctypes.byref(p), ctypes.c_size_t(n))
if rc != 0: print("job: cudaMalloc failed", rc, flush=True); sys.exit(3)
cu.cudaMemset(p, 1, ctypes.c_size_t(n)); cu.cudaDeviceSynchronize()
print("job: holding %.1f GiB on the GPU" % (n / 2**30), flush=True)
time.sleep(float(sys.argv[2]))
PY

"$L" serve -c "$W/loch.yaml" >"$OUT/jobs-serve.log" 2>&1 &
SERVE=$!
for _ in $(seq 100); do curl -sf "http://$URL/health" >/dev/null && break; sleep 0.2; done
say "chat request (loads the model)"
curl -s "http://$URL/v1/chat/completions" -H 'Content-Type: application/json' \
  -d '{"model":"chat","max_tokens":4,"messages":[{"role":"user","content":"hi"}]}' | head -c 300 | tee -a "$OUT/jobs.txt"
"$L" ps --url "$URL" | tee -a "$OUT/jobs.txt"
nvidia-smi --query-gpu=memory.total,memory.used --format=csv | tee -a "$OUT/jobs.txt"

say "loch run --memory 130GiB: a job that allocates 128 GiB for 40 s"
"$L" run --url "$URL" --memory 130GiB --name big -- python3 "$W/alloc.py" 128 40 >"$OUT/jobs-run-big.txt" 2>&1 &
BIG=$!
for _ in $(seq 300); do grep -q "job: holding" "$OUT/jobs-run-big.txt" && break; sleep 0.2; done
sleep 3  # a few ticks of per-process measurement
cat "$OUT/jobs-run-big.txt" | tee -a "$OUT/jobs.txt"
"$L" ps --all --url "$URL" | tee -a "$OUT/jobs.txt"
"$L" status --url "$URL" | tee -a "$OUT/jobs.txt"
nvidia-smi --query-compute-apps=pid,process_name,used_memory --format=csv | tee -a "$OUT/jobs.txt"

say "a second job that can never fit (150 GiB): refused at once"
start=$(date +%s%N)
"$L" run --url "$URL" --memory 150GiB --name huge -- true 2>&1 | tee -a "$OUT/jobs.txt"
echo "exit ${PIPESTATUS[0]} after $(( ($(date +%s%N) - start) / 1000000 )) ms" | tee -a "$OUT/jobs.txt"

say "a third that fits only after the first: waits with position and ETA, gives up after 8 s"
"$L" run --url "$URL" --memory 20GiB --name later --wait 8s -- true 2>&1 | tee -a "$OUT/jobs.txt"
echo "exit ${PIPESTATUS[0]}" | tee -a "$OUT/jobs.txt"

say "the first job ends; the chat model comes back on the next request (sent the moment loch run exits)"
wait $BIG; echo "loch run exit $?" | tee -a "$OUT/jobs.txt"
nvidia-smi --query-gpu=memory.used --format=csv,noheader | sed 's/^/GPU used right after the job: /' | tee -a "$OUT/jobs.txt"
curl -s "http://$URL/v1/chat/completions" -H 'Content-Type: application/json' \
  -d '{"model":"chat","max_tokens":4,"messages":[{"role":"user","content":"hi"}]}' | head -c 200 | tee -a "$OUT/jobs.txt"
curl -s "http://$URL/loch/status" >"$OUT/jobs-status.json"
python3 - "$OUT/jobs-status.json" <<'PY' | tee -a "$OUT/jobs.txt"
import json, sys
s = json.load(open(sys.argv[1]))
for e in s["events"]:
    print(e["at"], e["kind"], e.get("model") or e.get("job") or e.get("holder", ""), "-", e["message"][:200])
PY
say "out-of-memory lines anywhere (expect none)"
grep -il "out of memory\|cudaMalloc failed\|OOM" "$OUT"/jobs-*.txt "$W"/logs/*.log 2>/dev/null | tee -a "$OUT/jobs.txt" || true
kill $SERVE; wait $SERVE 2>/dev/null
echo done | tee -a "$OUT/jobs.txt"
