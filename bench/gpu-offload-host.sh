#!/usr/bin/env bash
# Issue 51: the host side of partial offload, on a GPU machine (the `device` tool). llama-server built for
# CUDA by the setup script's own build step from carried sources (as bench/gpu-sweep.sh: `bash
# bench/gpu-engines.sh --pack` here, with build/bin/{loch,loch-synth} stripped into devcarry-gpu/real/),
# synthetic models from loch-synth, each served with one partial-offload setting (-ot exps=CPU,
# --n-cpu-moe, -ngl below the layer count, with and without the CPU repack); a long prompt on every slot
# while /proc/PID/status is sampled every 50 ms. Truth: what the host must hold, the process's peak anonymous
# memory plus the mapped file pages of the weights the CPU computes with (the engine's "CPU_Mapped model buffer
# size"); VmRSS is printed beside it (its file part also has the GPU layers' pages, read once at load and
# reclaimable); loch's figure: `loch plan --device cuda0 ... --json`'s `cpu` total,
# which is what the broker books on `cpu` for such an engine. Results: $OUT/offload-host.md and .jsonl.
#   BUDGET_S=560 bash bench/gpu-offload-host.sh        (resumable: gpu-work/ keeps the build and the cases)
set -uo pipefail
R=$(pwd)
W=$R/gpu-work
OUT=${OUT:-$W/out}
BUDGET_S=${BUDGET_S:-560}
REAL=$R/devcarry-gpu/real
mkdir -p "$W/models" "$OUT"
# (loch and loch-synth run on the glibc they were built with, carried in devcarry-gpu/lib.)
# name | loch-synth arguments | server flags (beyond -c 8192 -np 2) | loch plan flags
CASES=(
  "moe-q4km-ot|--preset qwen3-30b-a3b --layers 12 --quant q4_k_m|-ngl 999 -ot exps=CPU|--override-tensor exps=CPU"
  "moe-q4km-ncpumoe6|--preset qwen3-30b-a3b --layers 12 --quant q4_k_m|-ngl 999 --n-cpu-moe 6|--n-cpu-moe 6"
  "moe-q4km-ot-norepack|--preset qwen3-30b-a3b --layers 12 --quant q4_k_m|-ngl 999 -ot exps=CPU --no-repack|--override-tensor exps=CPU --no-repack"
  "moe-q8-ot|--preset qwen3-30b-a3b --layers 12 --quant q8_0|-ngl 999 -ot exps=CPU|--override-tensor exps=CPU"
  "mla-q4km-ot|--preset deepseek-v2-lite --layers 10 --quant q4_k_m|-ngl 999 -ot exps=CPU|--override-tensor exps=CPU"
  "dense-q4_0-ngl12|--preset llama-3.1-8b --quant q4_0|-ngl 12|--ngl 12"
  "dense-q4km-ngl20|--preset qwen2.5-7b --quant q4_k_m|-ngl 20|--ngl 20"
)
touch "$W/offload-host.jsonl"
# shellcheck source=bench/gpu-llama-build.sh
source "$R/bench/gpu-llama-build.sh"
port=18431
for c in "${CASES[@]}"; do
  IFS='|' read -r name synth flags planflags <<<"$c"
  grep -q "\"case\": \"$name\"" "$W/offload-host.jsonl" && continue
  ((SECONDS + 90 < BUDGET_S)) || { echo "out of time before $name"; break; }
  model=$W/models/${name%%-*}-$(tr ' ' '_' <<<"$synth" | md5sum | cut -c1-8).gguf
  [[ -f $model ]] || "$R/devcarry-gpu/lib/ld-linux-x86-64.so.2" --library-path "$R/devcarry-gpu/lib" "$REAL/loch-synth" $synth --out "$model" >/dev/null || { echo "synth failed: $name"; continue; }
  plan=$("$R/devcarry-gpu/lib/ld-linux-x86-64.so.2" --library-path "$R/devcarry-gpu/lib" "$REAL/loch" plan "$model" --ctx 8192 --parallel 2 --device cuda0 $planflags --json)
  # shellcheck disable=SC2086
  "$W/out-llama/llama-server" -m "$model" -c 8192 -np 2 $flags --fit off -lv 4 --host 127.0.0.1 --port $port \
    >"$W/$name.log" 2>&1 &
  pid=$!
  python3 - "$pid" "$port" "$name" "$plan" "$flags" "$W/$name.log" >>"$W/offload-host.jsonl" <<'PY'
import json, sys, threading, time, urllib.request
pid, port, name, plan, flags = int(sys.argv[1]), int(sys.argv[2]), sys.argv[3], json.loads(sys.argv[4]), sys.argv[5]
log = sys.argv[6]
peak = {"VmRSS": 0, "RssAnon": 0, "RssFile": 0, "RssShmem": 0}
done = False
def status():
    out = {}
    for line in open(f"/proc/{pid}/status"):
        k, _, v = line.partition(":")
        if k in peak: out[k] = int(v.split()[0]) * 1024
    return out
def sample():
    while not done:
        try:
            s = status()
        except OSError:
            return
        for k, v in s.items(): peak[k] = max(peak[k], v)
        time.sleep(0.05)
t = threading.Thread(target=sample); t.start()
rec = {"case": name, "flags": flags}
try:
    for _ in range(2400):
        try:
            urllib.request.urlopen(f"http://127.0.0.1:{port}/health", timeout=2).read(); break
        except Exception:
            time.sleep(0.1)
    after_load = status()
    def ask(i):
        body = json.dumps({"prompt": [(7 * k + i) % 200 + 10 for k in range(3000)], "n_predict": 4,
                           "cache_prompt": False}).encode()
        try:
            urllib.request.urlopen(urllib.request.Request(f"http://127.0.0.1:{port}/completion", body,
                                   {"Content-Type": "application/json"}), timeout=600).read()
        except Exception as e:
            rec["error"] = f"slot {i}: {e}"
    th = [threading.Thread(target=ask, args=(i,)) for i in range(2)]
    [x.start() for x in th]; [x.join() for x in th]
    rec["after_load"] = after_load
except Exception as e:
    rec["error"] = str(e)
done = True; t.join()
cpu = [d for d in plan["devices"] if d["device"] == "cpu"]
rec["peak"] = peak
rec["buffer_lines"] = [l.strip() for l in open(log, errors="replace") if "buffer size" in l][:40]
# What the host must hold: the process's anonymous memory, and the file pages of the weights the CPU reads
# every token (the engine's own "CPU_Mapped model buffer size"). The rest of RssFile is the pages of weights
# copied to the GPU at load: clean page cache the kernel takes back at need, never needed again.
import re
mapped = sum(float(m.group(1)) for l in rec["buffer_lines"]
             for m in [re.search(r"CPU_Mapped model buffer size =\s*([0-9.]+) MiB", l)] if m)
rec["cpu_mapped_bytes"] = int(mapped * 2**20)
rec["truth_bytes"] = peak["RssAnon"] + rec["cpu_mapped_bytes"]
rec["plan_cpu"] = cpu[0] if cpu else None
rec["plan_cpu_bytes"] = cpu[0]["total_bytes"] if cpu else 0
print(json.dumps(rec))
PY
  kill $pid; wait $pid 2>/dev/null
  tail -1 "$W/offload-host.jsonl" | python3 -c '
import json, sys
r = json.loads(sys.stdin.read()); p, b, t = r["peak"], r["plan_cpu_bytes"], r["truth_bytes"]
print("%s: anon %.0f + CPU-mapped weights %.0f = %.0f MiB (RSS %.0f), loch books %.0f MiB on cpu: %+.2f%% %s" % (r["case"],
      p["RssAnon"] / 2**20, r["cpu_mapped_bytes"] / 2**20, t / 2**20, p["VmRSS"] / 2**20, b / 2**20, 100 * (b - t) / max(t, 1),
      r.get("error", "")))'
  port=$((port + 1))
done
python3 - "$W/offload-host.jsonl" >"$OUT/offload-host.md" <<'PY'
import json, sys
rows = [json.loads(l) for l in open(sys.argv[1]) if l.strip()]
print("| case | server flags | loch's cpu booking (weights + repack + KV + compute + output + overhead), MiB | "
      "truth: RssAnon peak + CPU-mapped weights, MiB | VmRSS peak (anon + file), MiB | booking − truth |")
print("|---|---|---|---|---|---|")
errs = []
for r in rows:
    p, b, c, t = r["peak"], r["plan_cpu_bytes"], r.get("plan_cpu") or {}, r["truth_bytes"]
    parts = " + ".join(f"{(c.get(k) or {}).get('bytes', 0) / 2**20:.0f}" for k in ("weights", "repack", "kv_cache", "compute", "output", "overhead"))
    e = (b - t) / t if t else float("nan")
    errs.append(e)
    print(f"| {r['case']} | `{r['flags']}` | {b / 2**20:.0f} ({parts}) | {p['RssAnon'] / 2**20:.0f} + {r['cpu_mapped_bytes'] / 2**20:.0f} = {t / 2**20:.0f} "
          f"| {p['VmRSS'] / 2**20:.0f} ({p['RssAnon'] / 2**20:.0f} + {p['RssFile'] / 2**20:.0f}) | {100 * e:+.2f}% {r.get('error', '')} |")
under = sum(1 for e in errs if e < 0)
print(f"\n{len(rows)} cases, {under} under, worst over {100 * max(errs):+.2f}%, worst {100 * min(errs):+.2f}%")
PY
cat "$OUT/offload-host.md"; cp "$W/offload-host.jsonl" "$OUT/"
