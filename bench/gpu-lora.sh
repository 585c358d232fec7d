#!/usr/bin/env bash
# Issue 51's LoRA sweep on a GPU machine (the `device` tool): llama-server built for CUDA by the setup script's
# own build step from carried sources (bench/gpu-engines.sh --pack, plus build/bin/plan-accuracy in
# devcarry-gpu/real/), then `plan-accuracy --mode gpu --lora-sweep`: loch's reservation (plan with the
# adapters, and the dry run + what it leaves out, adapters included) against NVML's per-process peak while
# every slot processes a prompt of several ubatches through the adapted graph. Resumable across calls while
# the machine is held; results in $OUT (lora-SET.md/.jsonl; SET=a the shapes
# the bound was set on, SET=b held out).
set -uo pipefail
R=$(pwd)
W=$R/gpu-work
OUT=${OUT:-$W/out}
BUDGET_S=${BUDGET_S:-560}
mkdir -p "$OUT"
# shellcheck source=bench/gpu-llama-build.sh
source "$R/bench/gpu-llama-build.sh"
left=$((BUDGET_S - SECONDS - 40))
((left > 30)) || exit 4
SET=${SET:-a}
touch "$W/lora-$SET.jsonl"
devcarry-gpu/real/plan-accuracy --mode gpu --lora-sweep --lora-set "$SET" --server "$W/out-llama/llama-server" \
  --fit-params "$W/out-llama/llama-fit-params" --work /tmp/pa-lora --deadline-s "$left" \
  --skip-done "$W/lora-$SET.jsonl" --jsonl "$W/lora-$SET.jsonl" >/dev/null 2>"$W/lora.err"
devcarry-gpu/real/plan-accuracy --mode gpu --lora-sweep --lora-set "$SET" --from-jsonl "$W/lora-$SET.jsonl" \
  --markdown "$OUT/lora-$SET.md" | tail -30
cp "$W/lora-$SET.jsonl" "$OUT/"
tail -5 "$W/lora.err"
