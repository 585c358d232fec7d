#!/usr/bin/env bash
# Generation speed of a llama-server build on the demo model: three /completion calls of 128 tokens each
# (prompt re-read every time), printing prompt and generation tokens per second as llama-server times them.
# Used to check that compiling llama.cpp's non-kernel code at -O1 (scripts/engines/llama-build.cmake) costs no
# speed: run it against two builds side by side, e.g.
#   bash bench/engine-speed.sh /var/cache/loch/llama.cpp-<commit>/bin/llama-server 18081
#   bash bench/engine-speed.sh build/bin/llama-server 18082
set -euo pipefail
BIN=${1:?llama-server to measure}
PORT=${2:-18081}
MODEL=${MODEL:-models/demo.gguf}
"$BIN" -m "$MODEL" --port "$PORT" -c 2048 >/dev/null 2>&1 &
PID=$!
trap 'kill $PID 2>/dev/null; wait $PID 2>/dev/null' EXIT
for _ in $(seq 50); do curl -sf "localhost:$PORT/health" >/dev/null && break; sleep 0.2; done
for _ in 1 2 3; do
  curl -s "localhost:$PORT/completion" -d '{"prompt":"Once upon a time there was a long story about many things and",
    "n_predict":128,"ignore_eos":true,"cache_prompt":false}' |
    python3 -c 'import json,sys; t=json.load(sys.stdin)["timings"]; print("prompt %.1f tok/s, generation %.1f tok/s" % (t["prompt_per_second"], t["predicted_per_second"]))'
done
