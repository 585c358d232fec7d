#!/usr/bin/env bash
# What loch costs while nothing happens (issue 55): `loch serve` on its embedded default with the demo model
# loaded by one chat, then SECONDS_IDLE of silence. From /proc, per thread of loch and of its idle
# llama-server side by side (the floor any front of that engine sits beside): CPU time (schedstat, in
# nanoseconds; clock ticks beside it) and wakeups — context switches, voluntary and not — per second, named
# by the thread's comm. Prints CPU % of one core for both, their ratio, and loch's wakeups per second with the
# threads that make them.
#   bash bench/idle.sh                 (SECONDS_IDLE=60 SETTLE=5; needs build/bin from scripts/setup.sh)
#   MAX_CPU_PCT=0.05 MAX_WAKEUPS=0.6 bash bench/idle.sh  the CI guard (scripts/test.sh): exits 1 when loch's
#                                      idle CPU or its wakeups per second exceed either bound
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
python3 - "$loch" "$engine" "$IDLE" "${MAX_CPU_PCT:-}" "${MAX_WAKEUPS:-}" <<'PY'
import os, sys, time
loch, engine, idle = int(sys.argv[1]), int(sys.argv[2]), float(sys.argv[3])
max_cpu = float(sys.argv[4]) if sys.argv[4] else None
max_wake = float(sys.argv[5]) if sys.argv[5] else None
hz = os.sysconf("SC_CLK_TCK")
def threads(pid):
    out = {}
    for tid in os.listdir(f"/proc/{pid}/task"):
        try:
            stat = open(f"/proc/{pid}/task/{tid}/stat").read()
            fields = stat[stat.rindex(")") + 2:].split()
            ticks = int(fields[11]) + int(fields[12])
            ns = int(open(f"/proc/{pid}/task/{tid}/schedstat").read().split()[0])
            sw = 0
            for line in open(f"/proc/{pid}/task/{tid}/status"):
                if line.startswith(("voluntary_ctxt_switches", "nonvoluntary_ctxt_switches")):
                    sw += int(line.split()[1])
            comm = open(f"/proc/{pid}/task/{tid}/comm").read().strip()
            out[tid] = (comm, ticks, sw, ns)
        except OSError:
            pass
    return out
a = {p: threads(p) for p in (loch, engine)}
t0 = time.monotonic(); time.sleep(idle); t1 = time.monotonic()
b = {p: threads(p) for p in (loch, engine)}
wall = t1 - t0
def delta(p, i):  # threads alive at both ends, plus what threads born since used
    return sum(v[i] - (a[p][t][i] if t in a[p] else 0) for t, v in b[p].items())
def wakeups(p):
    return {f"{comm} ({t})": (sw - (a[p][t][2] if t in a[p] else 0)) / wall for t, (comm, _, sw, _) in b[p].items()}
lt, et = delta(loch, 1), delta(engine, 1)
lns, ens = delta(loch, 3), delta(engine, 3)
lp, ep = 100 * lns / 1e9 / wall, 100 * ens / 1e9 / wall
lw, ew = wakeups(loch), wakeups(engine)
lwt = sum(lw.values())
print(f"idle {wall:.1f} s, the demo model loaded")
print(f"  loch serve   : {lns / 1e6:.1f} ms on CPU = {lp:.4f} % of one core ({lt} ticks of {1000 // hz} ms), {lwt:.2f} wakeups/s")
print(f"  llama-server : {ens / 1e6:.1f} ms on CPU = {ep:.4f} % of one core ({et} ticks), {sum(ew.values()):.2f} wakeups/s (its idle floor, side by side)")
print(f"  loch ÷ llama-server CPU: {lns / ens:.2f}" if ens else "  loch ÷ llama-server CPU: (the engine used none)")
for name, w in sorted(lw.items(), key=lambda x: -x[1]):
    if w > 0: print(f"    loch thread {name}: {w:.2f} wakeups/s")
failed = []
if max_cpu is not None and lp > max_cpu: failed.append(f"idle CPU {lp:.4f} % > {max_cpu} %")
if max_wake is not None and lwt > max_wake: failed.append(f"{lwt:.2f} wakeups/s > {max_wake}")
if max_cpu is not None or max_wake is not None:
    print("  IDLE GUARD FAILED: " + "; ".join(failed) if failed else f"  idle guard passed (CPU ≤ {max_cpu} %, wakeups ≤ {max_wake}/s)")
sys.exit(1 if failed else 0)
PY
