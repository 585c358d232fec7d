#!/usr/bin/env bash
# Builds the libFuzzer targets (fuzz/*.cpp) with clang-19 and runs each for LOCH_FUZZ_SECONDS (default 30), one per core,
# over its committed regression corpus (fuzz/corpus/<target>). Any crash, leak or timeout fails the run and
# leaves the reproducer in BUILD/findings/.
#   bash scripts/fuzz.sh          a fuzz-only clang build of its own in build-fuzz/ (-O1, LOCH_FUZZ=ON)
#   bash scripts/fuzz.sh BUILD    the targets of an existing sanitized build configured with LOCH_SANITIZE_FUZZ=ON
#                                 (the test command's build-asan/: one sanitized compile serves both)
set -euo pipefail
ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
OUT=${1:-${LOCH_FUZZ_BUILD_DIR:-$ROOT/build-fuzz}}
SECONDS_EACH=${LOCH_FUZZ_SECONDS:-30}

printf '\n==> Fuzzing (clang-19 libFuzzer, %s s per target, in %s)\n' "$SECONDS_EACH" "$OUT"
export CCACHE_BASEDIR=$ROOT CCACHE_NOHASHDIR=1
if (($# == 0)); then
  CXX=clang++-19 cmake -S "$ROOT" -B "$OUT" -G Ninja -DCMAKE_BUILD_TYPE=Release -DCMAKE_CXX_FLAGS_RELEASE="-O1 -g1" \
    -DCMAKE_CXX_COMPILER_LAUNCHER=ccache -DLOCH_FUZZ=ON >/dev/null
elif ! grep -q '^LOCH_SANITIZE_FUZZ:BOOL=ON' "$OUT/CMakeCache.txt" 2>/dev/null; then
  echo "fuzz.sh: $OUT is not a sanitized build with its fuzz targets (configure it with -DLOCH_SANITIZE=ON" \
    "-DLOCH_SANITIZE_FUZZ=ON, or run scripts/fuzz.sh without arguments)" >&2
  exit 2
fi
# Only the fuzz targets (and the modules they name), not the whole tree.
mapfile -t targets < <(cd "$ROOT/fuzz" && ls fuzz_*.cpp | sed 's/\.cpp$//')
cmake --build "$OUT" -j "$(nproc)" --target "${targets[@]}"
mkdir -p "$OUT/findings"
# Each target is one process on one core: the targets run side by side, one per core (2 cores: half the wall
# time for the same fuzzing time each).
fuzz_one() {
  local target=$1 name corpus work
  name=$(basename "$target")
  corpus=$ROOT/fuzz/corpus/$name
  work=$OUT/corpus-work/$name
  mkdir -p "$work"
  if "$target" -max_total_time="$SECONDS_EACH" -rss_limit_mb=2048 -timeout=10 -print_final_stats=0 \
    -artifact_prefix="$OUT/findings/$name-" "$work" "$corpus" 2>"$OUT/$name.log"; then
    echo "    $name: ${SECONDS_EACH}s, passed"
  else
    echo "FUZZ FAILURE in $name; last lines of $OUT/$name.log:"; tail -n 40 "$OUT/$name.log"; return 1
  fi
}
failed=0
running=0
for target in "$OUT"/fuzz/fuzz_*; do
  [[ -x $target ]] || continue
  if ((running >= $(nproc))); then wait -n || failed=1; running=$((running - 1)); fi
  fuzz_one "$target" &
  running=$((running + 1))
done
while ((running > 0)); do wait -n || failed=1; running=$((running - 1)); done
((failed == 0))
