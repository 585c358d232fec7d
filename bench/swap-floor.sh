#!/usr/bin/env bash
# A swap against its floor (issue 33; docs/performance.md). The floor: the pinned llama-server started alone
# with the argv loch gives it, its weights already in the page cache, from exec to the answer of a one-token
# request (process start, backend init, reading the file, the copy to the device, the first token; and the
# same with the engine's warm-up, which loch skips: --no-warmup).
# Against it, through `loch serve` with two models on a budget that holds one (`other` is booked at
# OTHER_MEMORY): request → first token for `chat` while `other` holds the device (the whole swap: stopping
# other, starting chat), and for `chat` evicted earlier with the device already free. Medians of ROUNDS.
#   bash bench/swap-floor.sh            (MODEL_ARGS, DEVICE, BUDGET, OTHER_MEMORY, ROUNDS; needs build/bin)
set -euo pipefail
R=$(cd "$(dirname "$0")/.." && pwd)
BIN=${BIN:-$R/build/bin}
DEVICE=${DEVICE:-cpu}
ROUNDS=${ROUNDS:-5}
W=$(mktemp -d /tmp/loch-swap.XXXXXX)
trap 'kill $(cat "$W"/*.pid 2>/dev/null) 2>/dev/null; wait 2>/dev/null; rm -rf "$W"' EXIT
read -r -a MODEL_ARGS <<< "${MODEL_ARGS:---arch llama --layers 12 --embd 1024 --heads 16 --ff 2816 --vocab 32000 --ctx 4096 --weights zeros}"
"$BIN/loch-synth" "${MODEL_ARGS[@]}" -o "$W/chat.gguf" >/dev/null
"$BIN/loch-synth" --preset tiny-qwen2 --weights small -o "$W/other.gguf" >/dev/null
PORT=18491
cat > "$W/loch.yaml" <<YAML
listen: 127.0.0.1
state_dir: $W/state
engine_dir: $BIN
devices: {$DEVICE: {budget: ${BUDGET:-2GiB}}}
models:
  - {name: chat, path: $W/chat.gguf, args: {ctx: 4096, parallel: 1}, devices: [$DEVICE]}
  - {name: other, path: $W/other.gguf, args: {ctx: 2048, parallel: 1}, memory: ${OTHER_MEMORY:-1500MiB}, devices: [$DEVICE]}
YAML
"$BIN/loch" serve --config "$W/loch.yaml" --port $PORT > "$W/loch.log" 2>&1 &
echo $! > "$W/loch.pid"
for _ in $(seq 100); do curl -sf "localhost:$PORT/health" >/dev/null && break; sleep 0.1; done
ask() { curl -s -o /dev/null -w '%{time_total}' "localhost:$PORT/v1/completions" \
  -d "{\"model\":\"$1\",\"prompt\":\"Hello\",\"max_tokens\":1}"; }
state() { curl -s "localhost:$PORT/loch/status" | python3 -c "import json,sys; print([e['state'] for e in json.load(sys.stdin)['engines'] if e['name']=='$1'][0])"; }
wait_stopped() { for _ in $(seq 600); do [ "$(state "$1")" = stopped ] && return; sleep 0.05; done; }
ask chat >/dev/null   # the file into the page cache; chat's argv for the floor
ARGV=$(grep -o "starting [^ ]*llama-server.*----" "$W/state/logs/chat.log" | head -1 | sed 's/^starting //; s/ ----$//')
swap=() cold=() floor=()
for _ in $(seq "$ROUNDS"); do
  ask other >/dev/null; wait_stopped chat
  swap+=("$(ask chat)")                       # other holds the device: stop it, start chat, first token
  curl -s -X POST "localhost:$PORT/loch/models/chat/unload" >/dev/null; wait_stopped chat
  cold+=("$(ask chat)")                       # chat evicted earlier, the device free
done
kill "$(cat "$W/loch.pid")"; wait "$(cat "$W/loch.pid")" 2>/dev/null || true
# The floor, timed by one Python process (no shell or curl start-up inside the figure): exec → healthy →
# one-token answer, polled every millisecond.
mapfile -t floor < <(python3 - "$ROUNDS" "$W/alone.log" $ARGV <<'PY'
import json, subprocess, sys, time, urllib.request
rounds, log, argv = int(sys.argv[1]), sys.argv[2], sys.argv[3:]
port = 18492
argv[argv.index("--port") + 1] = str(port)
# Each round: loch's argv (without the engine's warm-up: --no-warmup), then the same with the warm-up.
def once(args):
    t0 = time.monotonic()
    p = subprocess.Popen(args, stdout=open(log, "w"), stderr=subprocess.STDOUT)
    while True:
        try:
            if urllib.request.urlopen(f"http://127.0.0.1:{port}/health", timeout=1).status == 200: break
        except Exception:
            time.sleep(0.001)
    req = urllib.request.Request(f"http://127.0.0.1:{port}/v1/completions",
                                 json.dumps({"prompt": "Hello", "max_tokens": 1}).encode(),
                                 {"Content-Type": "application/json"})
    urllib.request.urlopen(req, timeout=600).read()
    took = time.monotonic() - t0
    p.terminate(); p.wait()
    return took
warm = [a for a in argv if a != "--no-warmup"]
for _ in range(rounds):
    print(round(once(argv), 4), round(once(warm), 4), flush=True)
PY
)
warmup=()
for i in "${!floor[@]}"; do read -r f w <<< "${floor[$i]}"; floor[$i]=$f; warmup+=("$w"); done
med() { printf '%s\n' "$@" | sort -g | awk '{a[NR]=$1} END {print a[int((NR+1)/2)]}'; }
F=$(med "${floor[@]}"); S=$(med "${swap[@]}"); C=$(med "${cold[@]}"); WU=$(med "${warmup[@]}")
echo "swap floor on $DEVICE ($(date -u +%F), model: ${MODEL_ARGS[*]}), medians of $ROUNDS:"
echo "  floor (llama-server alone, page cache warm, exec → first token): ${F} s   [${floor[*]}]"
echo "  the same with the engine's warm-up (what loch passed before):   ${WU} s   [${warmup[*]}]"
echo "  loch, evicted model, device free (request → first token):       ${C} s   [${cold[*]}]"
echo "  loch, swap while another model holds the device:               ${S} s   [${swap[*]}]"
python3 -c "print('  ratios to the floor: evicted %.2fx, swap %.2fx (goal <= 1.5x)' % ($C / $F, $S / $F))"
