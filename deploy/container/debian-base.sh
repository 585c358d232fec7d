#!/usr/bin/env bash
# Makes the podman image localhost/debian:bookworm from a bare debootstrap of Debian 12 (minbase) when podman
# does not have it yet: no registry is needed, only the Debian mirror apt already uses. The base of loch's
# image (deploy/container/build.sh) and of the pristine-machine check (scripts/test-pristine.sh).
#   bash deploy/container/debian-base.sh [IMAGE]
set -euo pipefail
BASE=${1:-localhost/debian:bookworm}
podman image exists "$BASE" && exit 0
mirror=$(sed -n 's/^URIs: *//p' /etc/apt/sources.list.d/debian.sources 2>/dev/null | head -1)
mirror=${mirror:-http://deb.debian.org/debian}
rootfs=$(mktemp -d)
trap 'rm -rf "$rootfs"' EXIT
echo "    making $BASE with debootstrap from $mirror (about a minute)"
debootstrap --variant=minbase bookworm "$rootfs" "$mirror" >/dev/null
tar -C "$rootfs" -c . | podman import - "$BASE" >/dev/null
