#!/usr/bin/env bash
# What loch costs while nothing happens (issue 55): `loch serve` on its embedded default with the demo model
# loaded by one chat, then SECONDS of silence. From /proc: CPU ticks of loch's process (every thread) and of
# its idle llama-server side by side (the floor any front of that engine sits beside), and wakeups — context
# switches, voluntary and not — per second per thread, named by the thread's comm. Prints CPU % of one core
# for both, their ratio, and loch's wakeups per second with the threads that make them.
#   bash bench/idle.sh                 (SECONDS_IDLE=60 SETTLE=5; needs build/bin from scripts/setup.sh)
set -euo pipefail
R=$(cd "$(dirname "$0")/.." && pwd)
BIN=${BIN:-$R/build/bin}
IDLE=${SECONDS_IDLE:-60}
SETTLE=${SETTLE:-5}
W=$(mktemp -d /tmp/loch-idle.XXXXXX)
trap 'kill $(cat "$W/loch.pid" 2>/dev/null) 2>/dev/null; wait 2>/dev/null; rm -rf "$W"' EXIT
mkdir -p "$W/models"
"$BIN/loch-synth" --preset demo --out "$W/models/demo.gguf" >/dev/null
port=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')
(cd "$W" && exec "$BIN/loch" serve --port "$port" --state-dir "$W/state" >"$W/loch.log" 2>&1) &
echo $! >"$W/loch.pid"
for _ in $(seq 100); do curl -sf "127.0.0.1:$port/health" >/dev/null && break; sleep 0.1; done
curl -sf "127.0.0.1:$port/v1/chat/completions" -H 'Content-Type: application/json' \
  -d '{"model":"demo","max_tokens":4,"messages":[{"role":"user","content":"Hello"}]}' >/dev/null
loch=$(cat "$W/loch.pid")
engine=$(pgrep -P "$loch" -f llama-server | head -1)
[[ -n $engine ]] || { tail -20 "$W/loch.log"; echo "no engine under loch" >&2; exit 1; }
sleep "$SETTLE"
python3 - "$loch" "$engine" "$IDLE" <<'PY'
import os, sys, time
loch, engine, idle = int(sys.argv[1]), int(sys.argv[2]), float(sys.argv[3])
hz = os.sysconf("SC_CLK_TCK")
def threads(pid):
    out = {}
    for tid in os.listdir(f"/proc/{pid}/task"):
        try:
            stat = open(f"/proc/{pid}/task/{tid}/stat").read()
            fields = stat[stat.rindex(")") + 2:].split()
            ticks = int(fields[11]) + int(fields[12])
            sw = 0
            for line in open(f"/proc/{pid}/task/{tid}/status"):
                if line.startswith(("voluntary_ctxt_switches", "nonvoluntary_ctxt_switches")):
                    sw += int(line.split()[1])
            comm = open(f"/proc/{pid}/task/{tid}/comm").read().strip()
            out[tid] = (comm, ticks, sw)
        except OSError:
            pass
    return out
a = {p: threads(p) for p in (loch, engine)}
t0 = time.monotonic(); time.sleep(idle); t1 = time.monotonic()
b = {p: threads(p) for p in (loch, engine)}
wall = t1 - t0
def cpu(p):
    return sum(v[1] for v in b[p].values()) - sum(a[p][t][1] for t in b[p] if t in a[p])
def wakeups(p):
    per = {}
    for t, (comm, _, sw) in b[p].items():
        if t in a[p]:
            per[f"{comm} ({t})"] = (sw - a[p][t][2]) / wall
    return per
lc, ec = cpu(loch), cpu(engine)
lp, ep = 100 * lc / hz / wall, 100 * ec / hz / wall
lw, ew = wakeups(loch), wakeups(engine)
print(f"idle {wall:.1f} s, the demo model loaded (clock ticks of {1000 // hz} ms)")
print(f"  loch serve   : {lc} ticks = {lp:.3f} % of one core, {sum(lw.values()):.1f} wakeups/s")
print(f"  llama-server : {ec} ticks = {ep:.3f} % of one core, {sum(ew.values()):.1f} wakeups/s (its idle floor, side by side)")
print(f"  loch ÷ llama-server CPU: {lc / ec:.2f}" if ec else "  loch ÷ llama-server CPU: (the engine used no tick)")
for name, w in sorted(lw.items(), key=lambda x: -x[1]):
    if w > 0: print(f"    loch thread {name}: {w:.2f} wakeups/s")
PY
