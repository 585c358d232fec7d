#!/usr/bin/env bash
# A continued conversation after a swap, with and without its slot restored (issue 33; docs/conversations.md).
# `loch serve` with two models on a budget that holds one: a long conversation on `chat`, then a request to
# `other` evicts it (the engine saves its slot first), then the conversation's next turn. Measured side by
# side in the same run: that turn's time to its first token (max_tokens 1, the whole request: engine start,
# restore, the prompt read) with slot_save on and off, and the engine's own prompt_ms and cache_n.
#   bash bench/conversation-restore.sh [TOKENS]      (default 16000; needs build/bin from scripts/setup.sh)
# MODEL_ARGS: loch-synth flags of the model (default a small llama with a 32 k context). DEVICE (default cpu),
# BUDGET and OTHER_MEMORY (what `other` is booked at: enough that the two never fit together).
set -euo pipefail
TOKENS=${1:-16000}
DEVICE=${DEVICE:-cpu}
R=$(cd "$(dirname "$0")/.." && pwd)
BIN=${BIN:-$R/build/bin}
W=$(mktemp -d /tmp/loch-restore.XXXXXX)
trap 'kill $(cat "$W"/*.pid 2>/dev/null) 2>/dev/null; wait 2>/dev/null; rm -rf "$W"' EXIT
read -r -a MODEL_ARGS <<< "${MODEL_ARGS:---preset tiny-llama --weights small --ctx 32768}"
"$BIN/loch-synth" "${MODEL_ARGS[@]}" -o "$W/chat.gguf" >/dev/null
"$BIN/loch-synth" --preset tiny-qwen2 --weights small -o "$W/other.gguf" >/dev/null
json() { python3 -c "import json,sys; d=json.load(sys.stdin); print($1)"; }

run_mode() {  # $1 = on|off → "ttft_s prompt_ms cache_n prompt_n"
  local mode=$1 port=$2 enabled=true
  [ "$mode" = off ] && enabled=false
  cat > "$W/$mode.yaml" <<YAML
listen: 127.0.0.1
state_dir: $W/state-$mode
engine_dir: $BIN
slot_save: {enabled: $enabled, min_tokens: 512}
devices: {$DEVICE: {budget: ${BUDGET:-1GiB}}}
models:
  - {name: chat, path: $W/chat.gguf, args: {ctx: $((TOKENS + 2048)), parallel: 1}, devices: [$DEVICE]}
  - {name: other, path: $W/other.gguf, args: {ctx: 2048, parallel: 1}, memory: ${OTHER_MEMORY:-1GiB}, devices: [$DEVICE]}
YAML
  "$BIN/loch" serve --config "$W/$mode.yaml" --port "$port" > "$W/$mode.log" 2>&1 &
  echo $! > "$W/$mode.pid"
  for _ in $(seq 100); do curl -sf "localhost:$port/health" >/dev/null && break; sleep 0.1; done
  # A conversation of about TOKENS tokens (the synthetic tokenizer: ~12.4 tokens per item).
  python3 - "$port" "$TOKENS" <<'PY' > "$W/$mode.result"
import json, sys, time, urllib.request
port, tokens = int(sys.argv[1]), int(sys.argv[2])
def post(path, body):
    req = urllib.request.Request(f"http://127.0.0.1:{port}{path}", json.dumps(body).encode(),
                                 {"Content-Type": "application/json"})
    return json.load(urllib.request.urlopen(req, timeout=3600))
text = " ".join(f"item{i} is here" for i in range(tokens * 10 // 124))
first = [{"role": "user", "content": text}]
a1 = post("/v1/chat/completions", {"model": "chat", "messages": first, "max_tokens": 4, "temperature": 0})
post("/v1/chat/completions", {"model": "other", "messages": [{"role": "user", "content": "hi"}], "max_tokens": 1})
for _ in range(600):
    st = json.load(urllib.request.urlopen(f"http://127.0.0.1:{port}/loch/status"))
    if [e for e in st["engines"] if e["name"] == "chat"][0]["state"] == "stopped": break
    time.sleep(0.05)
nxt = first + [{"role": "assistant", "content": a1["choices"][0]["message"]["content"]},
               {"role": "user", "content": "And then?"}]
t0 = time.monotonic()
a2 = post("/v1/chat/completions", {"model": "chat", "messages": nxt, "max_tokens": 1, "temperature": 0})
ttft = time.monotonic() - t0
t = a2["timings"]
ev = {e["kind"]: e for e in st["events"]}
print(f'{ttft:.3f} {t["prompt_ms"]:.1f} {t["cache_n"]} {t["prompt_n"]} {a1["usage"]["prompt_tokens"]}')
PY
  kill "$(cat "$W/$mode.pid")"; wait "$(cat "$W/$mode.pid")" 2>/dev/null || true
  cat "$W/$mode.result"
}
read -r on_ttft on_ms on_cache on_n first_n <<< "$(run_mode on 18391)"
read -r off_ttft off_ms off_cache off_n _ <<< "$(run_mode off 18392)"
saved=$(grep -o 'slots_saved.*' "$W/on.log" | head -1 || true)
restored=$(grep -o 'slot_restored.*' "$W/on.log" | head -1 || true)
echo "conversation of $first_n prompt tokens, continued after a swap ($(date -u +%F), $(nproc) cores)"
printf '  %-28s %10s %12s %9s %9s\n' "" "ttft_s" "prompt_ms" "cache_n" "prompt_n"
printf '  %-28s %10s %12s %9s %9s\n' "restored (slot_save on)" "$on_ttft" "$on_ms" "$on_cache" "$on_n"
printf '  %-28s %10s %12s %9s %9s\n' "re-read (slot_save off)" "$off_ttft" "$off_ms" "$off_cache" "$off_n"
python3 -c "print('  ratio restored / re-read: ttft %.3f, engine prompt time %.3f' % ($on_ttft / $off_ttft, $on_ms / $off_ms))"
echo "  $saved"
echo "  $restored"
