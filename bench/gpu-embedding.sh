#!/usr/bin/env bash
# Issue 51's embedding sweep on a GPU machine (the `device` tool): llama-server built for CUDA by the setup
# script's own build step from carried sources (bench/gpu-engines.sh --pack, plus build/bin/plan-accuracy in
# devcarry-gpu/real/), then `plan-accuracy --mode gpu --embedding-sweep`: loch's reservation against NVML's
# per-process peak while every slot computes one ubatch-long embedding. Resumable across calls (the build
# and the recorded cases stay in gpu-work/ while the machine is held); results in $OUT (embed.md/.jsonl).
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
touch "$W/embed-${SET:-a}.jsonl"
devcarry-gpu/real/plan-accuracy --mode gpu --embedding-sweep --embedding-set "${SET:-a}" --server "$W/out-llama/llama-server" \
  --fit-params "$W/out-llama/llama-fit-params" --work /tmp/pa-embed --deadline-s "$left" \
  --skip-done "$W/embed-${SET:-a}.jsonl" --jsonl "$W/embed-${SET:-a}.jsonl" >/dev/null 2>"$W/embed.err"
devcarry-gpu/real/plan-accuracy --mode gpu --embedding-sweep --embedding-set "${SET:-a}" --from-jsonl "$W/embed-${SET:-a}.jsonl" --markdown "$OUT/embed-${SET:-a}.md" | tail -30
cp "$W/embed-${SET:-a}.jsonl" "$OUT/"; tail -5 "$W/embed.err"
