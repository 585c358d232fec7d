#!/usr/bin/env bash
# Read-ahead (issue 33; docs/performance.md, "Swaps"): request → first token for a model whose file is not in
# the page cache, through two `loch serve`s side by side — read_ahead on and off — on a budget that holds
# one of two models, in two situations:
#   wait — the other model holds the device with a request running: chat waits for it to end (the
#          read-ahead has the whole wait);
#   swap — the other model holds the device idle: loch stops it and starts chat (the read-ahead has the
#          other engine's stop).
# The file is dropped from the page cache before each trial (dd iflag=nocache); the same `wait` with the
# file in the page cache is the reference. Medians of ROUNDS, the two lochs alternating by round.
# The weights are written (`--weights small`), not a sparse file: reading them costs what a real file does.
#   bash bench/read-ahead.sh        (MODEL_ARGS, OTHER_ARGS, DEVICE, BUDGET, OTHER_TOKENS, ROUNDS; needs build/bin)
set -euo pipefail
R=$(cd "$(dirname "$0")/.." && pwd)
BIN=${BIN:-$R/build/bin}
DEVICE=${DEVICE:-cpu}
ROUNDS=${ROUNDS:-5}
OTHER_TOKENS=${OTHER_TOKENS:-400}
W=$(mktemp -d /tmp/loch-read-ahead.XXXXXX)
trap 'kill $(cat "$W"/*.pid 2>/dev/null) 2>/dev/null; wait 2>/dev/null; rm -rf "$W"' EXIT
read -r -a MODEL_ARGS <<< "${MODEL_ARGS:---arch llama --layers 12 --embd 1024 --heads 16 --ff 2816 --vocab 32000 --ctx 4096 --weights small}"
"$BIN/loch-synth" "${MODEL_ARGS[@]}" -o "$W/chat.gguf" >/dev/null
# The other model: big enough that its long request lasts a second or two on a small CPU.
read -r -a OTHER_ARGS <<< "${OTHER_ARGS:---arch llama --layers 6 --embd 512 --heads 8 --ff 1408 --vocab 32000 --ctx 4096 --weights small}"
"$BIN/loch-synth" "${OTHER_ARGS[@]}" -o "$W/other.gguf" >/dev/null
start_loch() {  # name port read_ahead
  cat > "$W/$1.yaml" <<YAML
listen: 127.0.0.1
state_dir: $W/state-$1
engine_dir: $BIN
read_ahead: $3
devices: {$DEVICE: {budget: ${BUDGET:-2GiB}}}
models:
  - {name: chat, path: $W/chat.gguf, args: {ctx: 4096, parallel: 1}, devices: [$DEVICE], keep_alive: 1h}
  - {name: other, path: $W/other.gguf, args: {ctx: 2048, parallel: 1}, memory: ${OTHER_MEMORY:-1500MiB}, devices: [$DEVICE], keep_alive: 1h}
YAML
  "$BIN/loch" serve --config "$W/$1.yaml" --port "$2" > "$W/$1.log" 2>&1 &
  echo $! > "$W/$1.pid"
  for _ in $(seq 100); do curl -sf "localhost:$2/health" >/dev/null && return; sleep 0.1; done
}
start_loch on 18493 true
start_loch off 18494 false
ask() { curl -s -o /dev/null -w '%{time_total}' "localhost:$1/v1/completions" \
  -d "{\"model\":\"$2\",\"prompt\":\"Hello\",\"max_tokens\":${3:-1},\"ignore_eos\":true}"; }
state() { curl -s "localhost:$1/loch/status" | python3 -c "import json,sys; print([e['state'] for e in json.load(sys.stdin)['engines'] if e['name']=='$2'][0])"; }
wait_state() { for _ in $(seq 600); do [ "$(state "$1" "$2")" = "$3" ] && return; sleep 0.05; done; }
drop() { dd if="$W/chat.gguf" iflag=nocache count=0 status=none; }
# chat stopped, other loaded and idle
other_holds() { curl -s -X POST "localhost:$1/loch/models/chat/unload" >/dev/null; wait_state "$1" chat stopped
                ask "$1" other >/dev/null; }
trial_wait() {  # port cold|warm → chat's request → first token while other runs a long request
  other_holds "$1"; [ "$2" = cold ] && drop
  ask "$1" other "$OTHER_TOKENS" > "$W/other.s" &
  local bg=$!; sleep 0.05
  ask "$1" chat; wait $bg
}
trial_swap() { other_holds "$1"; drop; ask "$1" chat; }
declare -A T
for _ in $(seq "$ROUNDS"); do
  for L in on off; do
    P=$([ $L = on ] && echo 18493 || echo 18494)
    T[wait_$L]+="$(trial_wait $P cold) "
    T[swap_$L]+="$(trial_swap $P) "
  done
  T[wait_warm]+="$(trial_wait 18494 warm) "
  T[other]+="$(cat "$W/other.s") "
done
med() { printf '%s\n' $1 | sort -g | awk '{a[NR]=$1} END {print a[int((NR+1)/2)]}'; }
events() { curl -s "localhost:18493/loch/status" | python3 -c "import json,sys; print(sum(1 for e in json.load(sys.stdin)['events'] if e['kind']=='read_ahead_done'))"; }
echo "read-ahead on $DEVICE ($(date -u +%F), model: ${MODEL_ARGS[*]}, $(du -h "$W/chat.gguf" | cut -f1)), medians of $ROUNDS;"
echo "chat's file dropped from the page cache before each trial; read-aheads done: $(events)"
echo "  the other model's long request (the wait):        $(med "${T[other]}") s   [${T[other]}]"
echo "  wait, file in the page cache (reference):         $(med "${T[wait_warm]}") s   [${T[wait_warm]}]"
echo "  wait, cold file, read_ahead on:                   $(med "${T[wait_on]}") s   [${T[wait_on]}]"
echo "  wait, cold file, read_ahead off:                  $(med "${T[wait_off]}") s   [${T[wait_off]}]"
echo "  swap, cold file, read_ahead on:                   $(med "${T[swap_on]}") s   [${T[swap_on]}]"
echo "  swap, cold file, read_ahead off:                  $(med "${T[swap_off]}") s   [${T[swap_off]}]"
python3 -c "print('  on / off: wait %.2fx, swap %.2fx; wait cold with read-ahead / warm: %.2fx' % ($(med "${T[wait_on]}") / $(med "${T[wait_off]}"), $(med "${T[swap_on]}") / $(med "${T[swap_off]}"), $(med "${T[wait_on]}") / $(med "${T[wait_warm]}")))"
