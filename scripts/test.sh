#!/usr/bin/env bash
# Sets everything up (scripts/setup.sh), then runs the whole test suite:
#   format check (clang-format), fuzzers for a fixed time over their regression corpus,
#   and every GoogleTest suite through ctest — unit tests and integration tests against the real llama-server.
set -euo pipefail
ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
BUILD=${LOCH_BUILD_DIR:-$ROOT/build}

bash "$ROOT/scripts/setup.sh"

printf '\n==> Format check (clang-format-14, .clang-format)\n'
mapfile -t sources < <(cd "$ROOT" && git ls-files -- 'src/*.[ch]pp' 'tests/*.[ch]pp' 'fuzz/*.[ch]pp' 'bench/*.[ch]pp')
(cd "$ROOT" && clang-format-14 --dry-run --Werror "${sources[@]}")
echo "    ${#sources[@]} files formatted"

bash "$ROOT/scripts/fuzz.sh"

printf '\n==> Tests (ctest: unit, then integration against the real llama-server)\n'
ctest --test-dir "$BUILD" --output-on-failure --timeout 900 -j "$(nproc)" -LE integration
ctest --test-dir "$BUILD" --output-on-failure --timeout 900 -L integration
