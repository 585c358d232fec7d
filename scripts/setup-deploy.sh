#!/usr/bin/env bash
# The tools the deployment checks need (scripts/test-deploy.sh), pinned and cached under the cache dir; run by
# scripts/setup.sh --all and safe to run again:
#   Debian: podman + runc (crun refuses this kind of host's hybrid cgroups), debootstrap (the image's base,
#   with no registry), yamllint, systemd (systemd-analyze);
#   helm (Go module helm.sh/helm/v3, built once: about 150 s) and kubernetes-validate (PyPI, in a venv);
#   a containers.conf for podman here (runc; ulimits this sandbox can grant), used through CONTAINERS_CONF.
set -euo pipefail
CACHE=${LOCH_CACHE_DIR:-/var/cache/loch}
HELM_VERSION=v3.22.0
KV_PIN="kubernetes-validate==1.37.0"
start=$SECONDS
note() { printf '    %s\n' "$*"; }

missing=()
for p in podman runc debootstrap yamllint systemd; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if ((${#missing[@]})); then
  note "installing: ${missing[*]}"
  apt-get update -qq
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
fi

mkdir -p "$CACHE/podman"
cat >"$CACHE/podman/containers.conf" <<'CONF'
# podman on a cgroup-v1 (hybrid) host inside a sandbox: runc, and ulimits the sandbox can grant.
[engine]
runtime = "runc"
[containers]
default_ulimits = ["nofile=20000:20000", "nproc=32768:32768"]
CONF

HELM=$CACHE/tools/helm-$HELM_VERSION/helm
if [[ -x $HELM ]]; then
  note "helm $HELM_VERSION cached"
else
  GO=$(command -v go || true)
  [[ -z $GO && -x /usr/local/go/bin/go ]] && GO=/usr/local/go/bin/go
  if [[ -z $GO ]]; then
    # No Go here (Debian 12's is too old for helm): the toolchain as the go command itself fetches it, a zip
    # from the Go module proxy (module golang.org/toolchain), cached.
    GO_TC=v0.0.1-go1.26.0.linux-amd64  # helm v3.22.0 asks for go 1.26.0
    if [[ ! -x $CACHE/tools/$GO_TC/go/bin/go ]]; then
      note "fetching the Go toolchain $GO_TC from the Go module proxy"
      tmp=$(mktemp -d)
      curl -fsSL -o "$tmp/go.zip" "${GOPROXY_URL:-https://proxy.golang.org}/golang.org/toolchain/@v/$GO_TC.zip"
      mkdir -p "$CACHE/tools/$GO_TC"
      /usr/bin/python3 -m zipfile -e "$tmp/go.zip" "$tmp/x"
      mv "$tmp/x/golang.org/toolchain@$GO_TC" "$CACHE/tools/$GO_TC/go"
      chmod +x "$CACHE/tools/$GO_TC"/go/bin/* "$CACHE/tools/$GO_TC"/go/pkg/tool/*/*
      rm -rf "$tmp"
    fi
    GO=$CACHE/tools/$GO_TC/go/bin/go
  fi
  note "building helm $HELM_VERSION from the Go module proxy with $($GO version | cut -d' ' -f3) (about 150 s)"
  GOPATH=$CACHE/go GOCACHE=$CACHE/go/cache GOBIN=$CACHE/tools/helm-$HELM_VERSION GOTOOLCHAIN=auto \
    "$GO" install "helm.sh/helm/v3/cmd/helm@$HELM_VERSION"
fi

KV=$CACHE/tools/kv
if [[ -x $KV/bin/kubernetes-validate && "$(cat "$KV/PIN" 2>/dev/null)" == "$KV_PIN" ]]; then
  note "$KV_PIN cached"
else
  rm -rf "$KV"
  /usr/bin/python3 -m venv "$KV"
  "$KV/bin/pip" install --quiet --disable-pip-version-check "$KV_PIN"
  echo "$KV_PIN" >"$KV/PIN"
fi
note "deployment tools ready in $((SECONDS - start)) s"
