#!/usr/bin/env bash
# The LLM text encoder's compute buffer in sd-server (Flux.2-dev's Mistral Small 3.2 layout, CI-sized) against
# the prompt's length and the encoder's width, on the CPU: for each width/FFN pair and each prompt length, one
# 64x64 image, one step, and sd.cpp's own "mistral_small3.2 compute buffer size" line.
#   bash bench/sd-text-encoder.sh [BIN_DIR] [WORK_DIR]      (BIN_DIR: loch-synth and sd-server; build/bin)
# About 4 minutes on 2 cores. Issue 32: loch books a flat 256 MiB for a large text encoder; this shows the
# quadratic growth with the prompt that a per-request figure must follow.
set -euo pipefail
BIN=$(cd "${1:-build/bin}" && pwd)
WORK=${2:-$(mktemp -d)}
mkdir -p "$WORK" && cd "$WORK"
[[ -f flux2.gguf ]] || "$BIN/loch-synth" --diffusion flux2-tiny --out flux2.gguf >/dev/null
[[ -f vae.gguf ]] || "$BIN/loch-synth" --diffusion flux2-vae --out vae.gguf >/dev/null
printf '%-6s %-6s %-7s %s\n' width ffn words "text encoder compute buffer (sd.cpp's lines)"
for shape in "256 512" "512 2048" "1024 1024"; do
  read -r embd ffn <<<"$shape"
  "$BIN/loch-synth" --preset tiny-mistral-te --embd "$embd" --ff "$ffn" --out "te-$embd.gguf" >/dev/null
  for words in 5 300 1200; do
    port=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')
    log=te-$embd-$words.log
    # The diffusion model's context is 3 x 256 wide: at other widths the step fails after the text encoder ran,
    # which is all this measures.
    "$BIN/sd-server" --diffusion-model flux2.gguf --vae vae.gguf --llm "te-$embd.gguf" --listen-port "$port" \
      --steps 1 -t 2 -v >"$log" 2>&1 &
    pid=$!
    for _ in $(seq 1 120); do curl -s -o /dev/null "http://127.0.0.1:$port/" && break; sleep 0.5; done
    prompt=$(python3 -c "import sys; print(' '.join(['lighthouse'] * int(sys.argv[1])))" "$words")
    curl -s -o /dev/null --max-time 300 -X POST "http://127.0.0.1:$port/v1/images/generations" \
      -H 'Content-Type: application/json' -d "{\"prompt\":\"$prompt\",\"size\":\"64x64\"}" || true
    kill "$pid" 2>/dev/null || true
    wait "$pid" 2>/dev/null || true
    printf '%-6s %-6s %-7s %s\n' "$embd" "$ffn" "$words" \
      "$(grep -o 'mistral_small3.2 compute buffer size: [0-9.]* MB' "$log" | sed 's/.*: //' | tr '\n' ' ')"
  done
done
