#!/usr/bin/env bash
# bench/loch-ab.sh — CPU per keep-alive request of two loch binaries, side by side in one run.
#
# On a noisy VM the per-round figures of proxy-overhead swing by ±30 %; two builds of loch measured against
# each other, interleaved round by round on the same machine at the same time, show a change of 5–10 % that
# the bench alone cannot. Each loch serves the same generated tiny-llama model with its own llama-server
# (`-t 1`); a round sends N non-streamed `/v1/completions` (`max_tokens: 1`) over one keep-alive connection
# (Python's http.client) to A, then to B, and reads each loch's CPU from /proc/PID/schedstat (ns).
#
#   bash bench/loch-ab.sh OLD_LOCH NEW_LOCH [rounds=8] [requests=1500] [engine_dir=build/bin]
#
# Prints each round's ns per request for A and B, their medians and B ÷ A.
set -euo pipefail
A=$1 B=$2 R=${3:-8} N=${4:-1500}
ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
BIN=$(cd "${5:-$ROOT/build/bin}" && pwd)
WORK=$(mktemp -d)
trap 'kill $(cat "$WORK"/*/pid 2>/dev/null) 2>/dev/null || true; sleep 0.5; rm -rf "$WORK"' EXIT
"$BIN/loch-synth" --preset tiny-llama --weights small -o "$WORK/tiny.gguf" >/dev/null

cat >"$WORK/client.py" <<'PY'
import http.client, json, sys
port, n = int(sys.argv[1]), int(sys.argv[2])
c = http.client.HTTPConnection("127.0.0.1", port)
body = json.dumps({"model": "bench", "prompt": "Hello there, how are you today?", "max_tokens": 1})
for _ in range(n):
    c.request("POST", "/v1/completions", body, {"Content-Type": "application/json"})
    r = c.getresponse(); r.read()
    if r.status != 200: sys.exit(f"status {r.status}")
PY

free_port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }
start() {  # name binary → prints the port
  local d=$WORK/$1 port
  port=$(free_port)
  mkdir -p "$d"
  cat >"$d/loch.yaml" <<YAML
listen: 127.0.0.1
state_dir: $d/state
engine_dir: $BIN
devices:
  cpu:
    budget: 4GiB
models:
  - name: bench
    path: $WORK/tiny.gguf
    keep_alive: forever
    args: {ctx: 2048, parallel: 4, threads: 1}
YAML
  "$2" serve --config "$d/loch.yaml" --port "$port" >"$d/loch.log" 2>&1 &
  echo $! >"$d/pid"
  for _ in $(seq 100); do curl -sf "127.0.0.1:$port/health" >/dev/null && break; sleep 0.1; done
  python3 "$WORK/client.py" "$port" 300  # the engine started, warm
  echo "$port"
}
cpu() { awk '{print $1}' "/proc/$1/schedstat"; }
PA=$(start a "$A"); PB=$(start b "$B")
pa=$(cat "$WORK/a/pid"); pb=$(cat "$WORK/b/pid")
for r in $(seq "$R"); do
  for t in a b; do
    pid=$([[ $t == a ]] && echo "$pa" || echo "$pb"); port=$([[ $t == a ]] && echo "$PA" || echo "$PB")
    c0=$(cpu "$pid"); python3 "$WORK/client.py" "$port" "$N"; c1=$(cpu "$pid")
    echo "$t $(((c1 - c0) / N))"
  done
done | python3 -c '
import sys, statistics
v = {"a": [], "b": []}
for line in sys.stdin:
    t, ns = line.split(); v[t].append(int(ns))
for t in "ab": print(t.upper(), "ns/request per round:", " ".join(map(str, v[t])), " median", int(statistics.median(v[t])))
print("B / A (medians): %.3f" % (statistics.median(v["b"]) / statistics.median(v["a"])))'
