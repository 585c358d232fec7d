#!/usr/bin/env bash
# The README's first command, unchanged, on a pristine Debian 12: a container made from a bare debootstrap
# base (deploy/container/debian-base.sh) with nothing in it but Debian 12 minbase and the project's tracked
# files, as a clone has them. It passes when `loch serve` answers a chat; it prints the time of each setup
# step (setup.sh's own) and the whole. Run by scripts/test.sh after scripts/setup.sh --all --fetch-only
# (podman, the base's tools and the containers.conf this host needs come from there) and before the host's
# own builds: what the container built from nothing, the host would build again, so it goes into the host's
# caches — its engines into the engine cache (those not there yet), its compiler cache into the host's
# ccache (the clone sits at the host's path in the container, so loch's own sources hash alike). On a cold
# machine the host's setup then skips the CPU llama build and most of loch's compile (docs/ci.md).
#
# The registries: apt reaches Debian's mirror from inside the container, but npm inside it lacks this
# machine's registry settings, so the one thing only npm provides — the pinned llama.cpp source bundle — is
# handed in where setup.sh keeps it (/var/cache/loch/llama.cpp.bundle), as fetched on the host. Everything
# else (packages, compilers, the engine and loch builds, the demo model) happens inside, from nothing.
#   bash scripts/test-pristine.sh            (GOAL_S: the time goal printed beside the figure, default 600)
set -euo pipefail
ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
CACHE=${LOCH_CACHE_DIR:-/var/cache/loch}
export CONTAINERS_CONF=$CACHE/podman/containers.conf
GOAL_S=${GOAL_S:-600}
PORT=8080  # the embedded default's: the command is run as the README writes it
fail() { echo "FAIL: $*" >&2; exit 1; }

[[ -s $CACHE/llama.cpp.bundle ]] || fail "no $CACHE/llama.cpp.bundle: run bash scripts/setup.sh first"
! curl -s -o /dev/null "http://127.0.0.1:$PORT/health" || fail "port $PORT is taken on this machine"
bash "$ROOT/deploy/container/debian-base.sh"

work=$(mktemp -d)
name=loch-pristine-$$
cleanup() { podman rm -f -t 0 "$name" >/dev/null 2>&1 || true; rm -rf "$work"; }
trap cleanup EXIT
mkdir -p "$work/src" "$work/cache"
# The clone: the tracked files of this checkout, no build folders, no caches.
(cd "$ROOT" && git ls-files -z | tar --null -T - -c) | tar -x -C "$work/src"
cp "$CACHE/llama.cpp.bundle" "$work/cache/"

cat >"$work/run.sh" <<'SH'
set -e
cache=${LOCH_CACHE_DIR:-/var/cache/loch}
mkdir -p "$(dirname "$cache")"
cp -r /seed "$cache"
cd "$LOCH_CLONE"
start=$(date +%s)
# The README's first command, as written.
( bash scripts/setup.sh && build/bin/loch serve ) >/tmp/first.log 2>&1 &
for _ in $(seq 1 1500); do
  if curl -sf http://127.0.0.1:8080/health >/dev/null 2>&1; then break; fi
  if ! kill -0 $! 2>/dev/null; then tail -40 /tmp/first.log; echo "the first command ended without serving"; exit 1; fi
  sleep 1
done
curl -sf http://127.0.0.1:8080/v1/chat/completions -H 'Content-Type: application/json' \
  -d '{"model":"demo","max_tokens":8,"messages":[{"role":"user","content":"Hello"}]}' >/tmp/answer.json ||
  { tail -40 /tmp/first.log; echo "no answer to the chat"; exit 1; }
end=$(date +%s)
grep -E '^==>|built in|set up in|installing' /tmp/first.log
echo "answer: $(tr -d "\n" </tmp/answer.json)"
echo "FIRST_COMMAND_S=$((end - start))"
echo "CCACHE_DIR_IN=$(ccache -k cache_dir 2>/dev/null || true)"
SH
# The shell's locale as this machine's (a user's shell has one): ccache keys its entries by it too, and the
# builds here that take the container's must hash alike. Likewise the engine cache's path where this machine
# sets one (LOCH_CACHE_DIR): the engines' objects are hashed with their absolute paths under it.
same_env=()
for v in LANG LC_ALL LC_CTYPE LC_MESSAGES LOCH_CACHE_DIR; do [[ -n ${!v:-} ]] && same_env+=(-e "$v=${!v}"); done
# curl is not in minbase: the container gets it the way a user's machine would have it, before the command.
podman run --name "$name" --network host -v "$work/src:/src:ro" -v "$work/cache:/seed:ro" \
  -v "$work/run.sh:/run.sh:ro" -e LOCH_CLONE="$ROOT" "${same_env[@]}" localhost/debian:bookworm bash -c \
  'apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends curl ca-certificates git >/dev/null &&
   mkdir -p "$(dirname "$LOCH_CLONE")" && cp -r /src "$LOCH_CLONE" && bash /run.sh' | tee "$work/out.txt"
secs=$(sed -n 's/^FIRST_COMMAND_S=//p' "$work/out.txt")
[[ -n $secs ]] || fail "the README's first command did not answer a chat in a pristine container"
python3 - "$work/out.txt" <<'PY'
import json, sys
line = [l for l in open(sys.argv[1]) if l.startswith("answer: ")][0][len("answer: "):]
a = json.loads(line)
assert a["choices"][0]["message"]["content"] is not None, a
PY
echo "    the README's first command answered a chat after $secs s on $(nproc) cores in a pristine Debian 12 container (goal $GOAL_S s)"
((secs <= GOAL_S)) || echo "    WARNING: over the $GOAL_S s goal"

# What it built, for the host's builds that follow (see the top). Only what the host lacks: an engine already
# cached stays as it is; ccache keeps the host's own entries (cp -n).
out=$work/export
mkdir -p "$out" "$CACHE/engines"
if podman cp "$name:$CACHE/engines" "$out/engines" 2>/dev/null; then
  for e in "$out"/engines/*/; do
    key=$(basename "$e")
    [[ -d $CACHE/engines/$key ]] && continue
    cp -a "${e%/}" "$CACHE/engines/$key"
    echo "    engine $key: taken from the container into $CACHE/engines/"
  done
fi
in_dir=$(sed -n 's/^CCACHE_DIR_IN=//p' "$work/out.txt")
if [[ -n $in_dir ]] && command -v ccache >/dev/null && podman cp "$name:$in_dir" "$out/ccache" 2>/dev/null; then
  host_dir=$(ccache -k cache_dir)
  mkdir -p "$host_dir"
  cp -rn "$out/ccache/." "$host_dir/"
  echo "    compiler cache: $(du -sh "$out/ccache" | cut -f1) from the container added to $host_dir"
fi
