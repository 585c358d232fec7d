#!/usr/bin/env bash
# Installs loch as a system service from a build (bash scripts/setup.sh made build/bin):
#   loch, loch-synth and the engines beside them → /usr/local/lib/loch (loch looks for engines there),
#   /usr/local/bin/loch → it, the unit → /etc/systemd/system/loch.service, /etc/loch/loch.yaml (an existing one
#   is kept), docs/deploy.md → /usr/local/share/doc/loch, a `loch` system user in the video and render groups;
#   then, where systemd runs, enables and (re)starts the service.
#   bash deploy/systemd/install.sh [--bin DIR] [--root DIR] [--no-start]
# --root DIR installs into DIR instead of / (packaging, CI): no user, no systemctl.
set -euo pipefail
HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
ROOT_DIR=$(cd "$HERE/../.." && pwd)
BIN=$ROOT_DIR/build/bin DEST=/ START=1
while (($#)); do
  case $1 in
    --bin) BIN=$2; shift 2 ;;
    --root) DEST=$2; shift 2 ;;
    --no-start) START=0; shift ;;
    *) echo "install.sh: unknown option '$1' (use --bin DIR, --root DIR, --no-start)" >&2; exit 2 ;;
  esac
done
[[ -x $BIN/loch ]] || { echo "install.sh: no $BIN/loch: build it first (bash scripts/setup.sh)" >&2; exit 1; }
[[ $DEST == / || $DEST == */ ]] || DEST=$DEST/

lib=${DEST}usr/local/lib/loch
install -d "$lib" "${DEST}usr/local/bin" "${DEST}etc/systemd/system" "${DEST}etc/loch" "${DEST}usr/local/share/doc/loch"
for b in loch loch-synth llama-server llama-fit-params sd-server whisper-server; do
  [[ -x $BIN/$b ]] && install -m 0755 "$BIN/$b" "$lib/$b"
done
ln -sfn /usr/local/lib/loch/loch "${DEST}usr/local/bin/loch"
install -m 0644 "$HERE/loch.service" "${DEST}etc/systemd/system/loch.service"
install -m 0644 "$ROOT_DIR/docs/deploy.md" "${DEST}usr/local/share/doc/loch/deploy.md"
if [[ -e ${DEST}etc/loch/loch.yaml ]]; then
  echo "    kept ${DEST}etc/loch/loch.yaml"
else
  install -m 0644 "$HERE/loch.yaml" "${DEST}etc/loch/loch.yaml"
fi
echo "    installed loch into ${DEST}usr/local/lib/loch and the unit into ${DEST}etc/systemd/system"
[[ $DEST == / ]] || exit 0

for g in video render; do getent group "$g" >/dev/null || groupadd --system "$g"; done
if ! id loch >/dev/null 2>&1; then
  useradd --system --user-group --groups video,render --home-dir /var/lib/loch --no-create-home \
    --shell /usr/sbin/nologin loch
fi
if ((START)) && [[ -d /run/systemd/system ]]; then
  systemctl daemon-reload
  systemctl enable loch.service
  systemctl restart loch.service
  echo "    loch.service is $(systemctl is-active loch.service); logs: journalctl -u loch (a config error shows there)"
else
  echo "    systemd is not running here (or --no-start): start it with systemctl enable --now loch"
fi
