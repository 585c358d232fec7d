#!/usr/bin/env bash
# Why loch books CPU threads like memory (broker/cpu_threads; docs/performance.md, "Threads on a shared CPU"):
# two pinned llama-servers on the CPU, each with THREADS threads, each asked for TOKENS tokens — one alone,
# then both at once, then both at once with --poll 0 (ggml's threads sleep instead of spinning at a
# barrier). On a box with fewer cores than 2 × THREADS the pair is far slower than twice one alone: the
# reason a CPU engine waits for another that computes. Medians of ROUNDS.
#   bash bench/cpu-oversubscription.sh          (THREADS default: the cores; TOKENS 64; ROUNDS 3; needs build/bin)
set -euo pipefail
R=$(cd "$(dirname "$0")/.." && pwd)
BIN=${BIN:-$R/build/bin}
THREADS=${THREADS:-$(nproc)}
TOKENS=${TOKENS:-64}
ROUNDS=${ROUNDS:-3}
W=$(mktemp -d /tmp/loch-oversub.XXXXXX)
trap 'kill $(cat "$W"/*.pid 2>/dev/null) 2>/dev/null; wait 2>/dev/null; rm -rf "$W"' EXIT
"$BIN/loch-synth" --arch llama --layers 12 --embd 1024 --heads 16 --ff 2816 --vocab 32000 --ctx 4096 \
  --weights small -o "$W/m.gguf" >/dev/null
start() {  # port, extra flags…
  local port=$1; shift
  "$BIN/llama-server" -m "$W/m.gguf" --port "$port" -t "$THREADS" -c 2048 -np 1 --no-warmup "$@" \
    > "$W/$port.log" 2>&1 &
  echo $! > "$W/$port.pid"
  for _ in $(seq 300); do curl -sf "localhost:$port/health" >/dev/null && return; sleep 0.1; done
  echo "llama-server on $port did not start" >&2; exit 1
}
stop_all() { kill $(cat "$W"/*.pid) 2>/dev/null; wait 2>/dev/null || true; rm -f "$W"/*.pid; }
# One Python process times the requests (no curl start-up in the figures); prints seconds per round.
timed() {  # mode ports…
  python3 - "$ROUNDS" "$TOKENS" "$@" <<'PY'
import json, sys, threading, time, urllib.request
rounds, tokens, mode, ports = int(sys.argv[1]), int(sys.argv[2]), sys.argv[3], sys.argv[4:]
def ask(port):
    body = json.dumps({"prompt": "Once upon a time", "max_tokens": tokens, "temperature": 0,
                       "ignore_eos": True, "cache_prompt": False}).encode()
    urllib.request.urlopen(urllib.request.Request(f"http://127.0.0.1:{port}/v1/completions", body,
                                                  {"Content-Type": "application/json"}), timeout=600).read()
for _ in range(rounds):
    t0 = time.monotonic()
    if mode == "alone":
        ask(ports[0])
    else:
        ts = [threading.Thread(target=ask, args=(p,)) for p in ports]
        [t.start() for t in ts]; [t.join() for t in ts]
    print(round(time.monotonic() - t0, 3), flush=True)
PY
}
med() { printf '%s\n' "$@" | sort -g | awk '{a[NR]=$1} END {print a[int((NR+1)/2)]}'; }
start 18601; start 18602
mapfile -t alone < <(timed alone 18601)
mapfile -t both < <(timed both 18601 18602)
stop_all
start 18601 --poll 0; start 18602 --poll 0
mapfile -t nopoll < <(timed both 18601 18602)
stop_all
A=$(med "${alone[@]}"); B=$(med "${both[@]}"); P=$(med "${nopoll[@]}")
echo "two llama-servers of $THREADS thread(s) on $(nproc) core(s), $TOKENS tokens each ($(date -u +%F)), medians of $ROUNDS:"
echo "  one alone:                 ${A} s   [${alone[*]}]"
echo "  both at once:              ${B} s   [${both[*]}]"
echo "  both at once, --poll 0:    ${P} s   [${nopoll[*]}]"
python3 -c "print('  both at once / one alone: %.1fx (%.1fx with --poll 0); one after the other would be 2.0x' % ($B / $A, $P / $A))"
