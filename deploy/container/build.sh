#!/usr/bin/env bash
# Builds loch's container image with podman from a build's binaries (bash scripts/setup.sh --images --speech
# made build/bin): stages them with the Containerfile and the container's loch.yaml in a small build context,
# names the Debian packages their shared libraries come from (ldd + dpkg -S), and runs `podman build`.
#   bash deploy/container/build.sh [--bin DIR] [--tag TAG] [--base IMAGE] [--extra-packages "PKG ..."]
# --base defaults to localhost/debian:bookworm, made here with debootstrap when podman does not have it (no
# registry needed: it comes from the Debian mirror apt already uses). GPU variants: docs/deploy.md.
set -euo pipefail
HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
ROOT_DIR=$(cd "$HERE/../.." && pwd)
BIN=$ROOT_DIR/build/bin TAG=localhost/loch:latest BASE=localhost/debian:bookworm EXTRA=""
while (($#)); do
  case $1 in
    --bin) BIN=$2; shift 2 ;;
    --tag) TAG=$2; shift 2 ;;
    --base) BASE=$2; shift 2 ;;
    --extra-packages) EXTRA=$2; shift 2 ;;
    *) echo "build.sh: unknown option '$1' (use --bin, --tag, --base, --extra-packages)" >&2; exit 2 ;;
  esac
done
for b in loch loch-synth llama-server; do
  [[ -x $BIN/$b ]] || { echo "build.sh: no $BIN/$b: build it first (bash scripts/setup.sh)" >&2; exit 1; }
done

[[ $BASE == localhost/debian:bookworm ]] && bash "$(dirname "${BASH_SOURCE[0]}")/debian-base.sh" "$BASE"

ctx=$(mktemp -d)
trap 'rm -rf "$ctx"' EXIT
mkdir "$ctx/bin"
for b in loch loch-synth llama-server llama-fit-params sd-server whisper-server; do
  [[ -x $BIN/$b ]] && cp "$BIN/$b" "$ctx/bin/"
done
# A GPU build's engines load their ggml back ends from beside them (libggml-cuda.so, libggml-hip.so, ...).
find "$BIN" -maxdepth 1 -name '*.so*' -exec cp -P {} "$ctx/bin/" \;
cp "$HERE/Containerfile" "$HERE/loch.yaml" "$ctx/"
# The packages that ship the shared libraries the binaries link (libc and libstdc++ are in every base).
packages=$(for b in "$ctx"/bin/*; do { ldd "$b" 2>/dev/null || true; } | awk '$3 ~ /^\// {print $3}'; done | sort -u |
  while read -r lib; do dpkg -S "$(readlink -f "$lib")" 2>/dev/null || dpkg -S "$lib" 2>/dev/null; done |
  cut -d: -f1 | sort -u | grep -v -x -e libc6 -e libgcc-s1 -e libstdc++6 | tr '\n' ' ')
echo "    runtime packages: ${packages:-none}"
podman build --network host --build-arg BASE="$BASE" --build-arg RUNTIME_PACKAGES="$packages" \
  --build-arg EXTRA_PACKAGES="$EXTRA" -t "$TAG" "$ctx"
echo "    built $TAG"
