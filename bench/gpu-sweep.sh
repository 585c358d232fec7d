#!/usr/bin/env bash
# Issue 51's sweeps on a GPU machine (the `device` tool): llama-server built for CUDA by the setup script's own
# build step from carried sources (bench/gpu-engines.sh --pack, plus build/bin/plan-accuracy in
# devcarry-gpu/real/), then `plan-accuracy --mode gpu --<SWEEP>-sweep --<SWEEP>-set SET`: loch's reservation
# (its plan, and the dry run + what it leaves out) against NVML's per-process peak while every slot works —
#   embedding: new shapes served with --embedding at large ubatches, each slot one ubatch-long embedding;
#   lora:      new shapes with LoRA adapters of several ranks and targets, each slot a prompt of several
#              ubatches through the adapted graph;
#   draft:     new model/draft pairs under speculative decoding (--spec-type draft-simple), each slot a
#              prompt of several ubatches then drafted and verified tokens.
# SET=a: the shapes a fix was made on; SET=b: held out. Resumable across calls (the build and the recorded
# cases stay in gpu-work/ while the machine is held); results in $OUT (SWEEP-SET.md/.jsonl).
#   SET=b BUDGET_S=560 bash bench/gpu-sweep.sh lora
set -uo pipefail
SWEEP=${1:?usage: bench/gpu-sweep.sh embedding|lora|draft}
[[ $SWEEP == embedding || $SWEEP == lora || $SWEEP == draft ]] || { echo "unknown sweep '$SWEEP' (embedding, lora or draft)" >&2; exit 2; }
SET=${SET:-a}
R=$(pwd)
W=$R/gpu-work
OUT=${OUT:-$W/out}
BUDGET_S=${BUDGET_S:-560}
mkdir -p "$OUT"
# shellcheck source=bench/gpu-llama-build.sh
source "$R/bench/gpu-llama-build.sh"
left=$((BUDGET_S - SECONDS - 40))
((left > 30)) || exit 4
rec=$W/$SWEEP-$SET.jsonl
touch "$rec"
devcarry-gpu/real/plan-accuracy --mode gpu "--$SWEEP-sweep" "--$SWEEP-set" "$SET" \
  --server "$W/out-llama/llama-server" --fit-params "$W/out-llama/llama-fit-params" --work "/tmp/pa-$SWEEP" \
  --deadline-s "$left" --skip-done "$rec" --jsonl "$rec" >/dev/null 2>"$W/$SWEEP.err"
devcarry-gpu/real/plan-accuracy --mode gpu "--$SWEEP-sweep" "--$SWEEP-set" "$SET" --from-jsonl "$rec" \
  --markdown "$OUT/$SWEEP-$SET.md" | tail -30
cp "$rec" "$OUT/"
tail -5 "$W/$SWEEP.err"
