#!/usr/bin/env bash
# The deployment checks (docs/deploy.md), run by scripts/test.sh after scripts/setup.sh --all:
#   1. systemd: deploy/systemd/loch.service verifies (systemd-analyze verify) and its hardening scores at most
#      4.0 (systemd-analyze security --offline); install.sh lays out a root;
#   2. Helm: yamllint, helm lint, and helm template for each values case piped into kubernetes-validate
#      --strict for every supported Kubernetes version;
#   3. the container image, built with podman from a debootstrap base: it runs as loch's user, serves the demo
#      model and answers a completion, and `podman stop` ends it by loch's drain, not by the 10 s kill;
#   4. the memory limit: the image under `podman run --memory 512m`; a model configured above the limit is
#      refused before it starts (the limit is the CPU's capacity), and an engine double
#      (tests/doubles/growing_server.py) that grows past it gets an error that names the limit and the
#      cgroup's oom_kill counter; loch still answers.
#   bash scripts/test-deploy.sh [--only systemd|helm|image]
set -euo pipefail
ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
BIN=${LOCH_BUILD_DIR:-$ROOT/build}/bin
CACHE=${LOCH_CACHE_DIR:-/var/cache/loch}
HELM=$CACHE/tools/helm-v3.22.0/helm
KV=$CACHE/tools/kv/bin/kubernetes-validate
KUBE_VERSIONS=(1.30.0 1.31.0 1.32.0 1.33.0 1.34.0 1.35.0 1.36.0 1.37.0)
export CONTAINERS_CONF=$CACHE/podman/containers.conf
ONLY=${2:-}
[[ ${1:-} == --only ]] || ONLY=""
work=$(mktemp -d)
containers=()
cleanup() {
  for c in "${containers[@]}"; do podman rm -f -t 0 "$c" >/dev/null 2>&1 || true; done
  rm -rf "$work"
}
trap cleanup EXIT
fail() { echo "FAIL: $*" >&2; exit 1; }
ok() { echo "    ok: $*"; }
want() { [[ -z $ONLY || $ONLY == "$1" ]]; }

# ------------------------------------------------------------------ 1. systemd
if want systemd; then
  # verify needs ExecStart to exist: the same unit with the built binary in its place.
  sed "s#/usr/local/lib/loch/loch #$BIN/loch #" "$ROOT/deploy/systemd/loch.service" >"$work/loch.service"
  systemd-analyze verify --man=no "$work/loch.service" 2>&1 | tee "$work/verify.log"
  [[ ! -s $work/verify.log ]] || fail "systemd-analyze verify has findings (above)"
  ok "systemd-analyze verify: clean"
  systemd-analyze security --offline=yes --threshold=40 "$work/loch.service" >"$work/security.log" 2>&1 ||
    { tail -5 "$work/security.log"; fail "the unit's exposure is above 4.0"; }
  ok "$(grep -o 'Overall exposure level.*' "$work/security.log")"
  for k in "KillMode=mixed" "OOMPolicy=continue" "User=loch" "SupplementaryGroups=video render"; do
    grep -qx "$k" "$ROOT/deploy/systemd/loch.service" || fail "the unit lost $k"
  done
  grep -q '^MemoryMax=' "$ROOT/deploy/systemd/loch.service" && fail "the unit sets MemoryMax= (the container trap)"
  bash "$ROOT/deploy/systemd/install.sh" --bin "$BIN" --root "$work/root" >/dev/null
  for f in usr/local/lib/loch/loch usr/local/lib/loch/llama-server etc/systemd/system/loch.service etc/loch/loch.yaml; do
    [[ -e $work/root/$f ]] || fail "install.sh did not install $f"
  done
  "$work/root/usr/local/lib/loch/loch" --help >/dev/null
  ok "install.sh --root lays out loch, its engines, the unit and /etc/loch/loch.yaml"
fi

# ------------------------------------------------------------------ 2. Helm chart
if want helm; then
  (cd "$ROOT" && yamllint -c .yamllint deploy .yamllint)
  ok "yamllint deploy/"
  chart=$ROOT/deploy/helm/loch
  "$HELM" lint --strict "$chart" >/dev/null || "$HELM" lint --strict "$chart"
  ok "helm lint --strict"
  declare -A cases=(
    [default]=""
    [nvidia]="--set gpu.vendor=nvidia --set gpu.count=2 --set nodeSelector.loch\.ai/gpu=nvidia"
    [amd]="--set gpu.vendor=amd --set nodeSelector.loch\.ai/gpu=amd --set service.agentPort=8081"
    [claims]="--set models.existingClaim=models --set state.existingClaim=state --set apiKeys.existingSecret=keys --set-string resources.limits.memory=64Gi"
  )
  for name in "${!cases[@]}"; do
    for v in "${KUBE_VERSIONS[@]}"; do
      # shellcheck disable=SC2086
      "$HELM" template loch "$chart" --kube-version "$v" ${cases[$name]} >"$work/$name.yaml"
      "$KV" --strict --quiet -k "$v" "$work/$name.yaml" || fail "helm template ($name) is not valid for Kubernetes $v"
    done
    yamllint -d relaxed "$work/$name.yaml" >/dev/null
  done
  ok "helm template (${!cases[*]}) valid --strict for Kubernetes ${KUBE_VERSIONS[*]}"
  grep -q 'nvidia.com/gpu: 2' "$work/nvidia.yaml" && grep -q 'runtimeClassName: nvidia' "$work/nvidia.yaml" ||
    fail "the NVIDIA values do not ask for the GPUs"
  grep -q 'amd.com/gpu: 1' "$work/amd.yaml" && grep -q 'supplementalGroups' "$work/amd.yaml" ||
    fail "the AMD values do not ask for the GPU and its groups"
  grep -q 'memory:' <(sed -n '/limits:/,/volumeMounts/p' "$work/default.yaml") &&
    fail "the default values set a memory limit"
  # The CRD-backed objects (no schema in kubernetes-validate): rendered and linted.
  "$HELM" template loch "$chart" --kube-version 1.33.0 --set serviceMonitor.enabled=true --set inferencePool.enabled=true \
    >"$work/crds.yaml"
  grep -q 'kind: ServiceMonitor' "$work/crds.yaml" && grep -q 'kind: InferencePool' "$work/crds.yaml" ||
    fail "ServiceMonitor / InferencePool not rendered"
  yamllint -d relaxed "$work/crds.yaml" >/dev/null
  ok "ServiceMonitor and InferencePool render"
fi

# ------------------------------------------------------------------ 3. the image
if want image; then
  # conmon (podman's container monitor) leaves a file named "oom" in its working directory when a container
  # hits its memory limit: keep that out of the checkout.
  cd "$work"
  bash "$ROOT/deploy/container/build.sh" --bin "$BIN" --tag localhost/loch:ci | tail -3
  python3 -c 'import secrets; print(secrets.token_hex(20))' >"$work/keys"
  chmod 0644 "$work/keys"
  key=$(cat "$work/keys")
  port=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')
  wait_health() {  # port, container
    for _ in $(seq 1 120); do
      curl -fsS "http://127.0.0.1:$1/health" >/dev/null 2>&1 && return 0
      podman container exists "$2" && [[ $(podman inspect -f '{{.State.Running}}' "$2") == true ]] ||
        { podman logs "$2" | tail -20; fail "the container $2 ended"; }
      sleep 0.5
    done
    podman logs "$2" | tail -20
    fail "loch in $2 did not answer /health within 60 s"
  }
  c=loch-ci-$$
  containers+=("$c")
  # The container's own port through the host's network (this sandbox has no container networking to map).
  podman run -d --name "$c" --network host -v "$work/keys:/run/secrets/loch-api-keys:ro" \
    localhost/loch:ci serve --config /etc/loch/loch.yaml --port "$port" >/dev/null
  wait_health "$port" "$c"
  [[ $(podman exec "$c" id -un) == loch ]] || fail "the container does not run as loch"
  [[ $(podman exec "$c" cat /proc/1/comm) == tini ]] || fail "PID 1 is not tini"
  status=$(curl -s -o /dev/null -w '%{http_code}' "http://127.0.0.1:$port/v1/models")
  [[ $status == 401 ]] || fail "no key: expected 401, got $status"
  curl -fsS -H "Authorization: Bearer $key" -H 'Content-Type: application/json' \
    -d '{"model":"demo","messages":[{"role":"user","content":"Hello"}],"max_tokens":8,"temperature":0}' \
    "http://127.0.0.1:$port/v1/chat/completions" >"$work/answer.json"
  python3 - "$work/answer.json" <<'PY'
import json, sys
a = json.load(open(sys.argv[1]))
assert a["choices"][0]["message"]["content"], a
assert a["usage"]["completion_tokens"] > 0, a
PY
  ok "the image serves the demo model as user loch under tini, with keys: $(head -c 120 "$work/answer.json")…"
  t0=$SECONDS
  podman stop -t 30 "$c" >/dev/null
  (( SECONDS - t0 < 9 )) || fail "podman stop took $((SECONDS - t0)) s: loch did not drain and exit on SIGTERM"
  [[ $(podman inspect -f '{{.State.ExitCode}}' "$c") == 0 ]] || fail "loch exited with $(podman inspect -f '{{.State.ExitCode}}' "$c")"
  ok "podman stop: drained and exited 0 in $((SECONDS - t0)) s"

  # 4. The memory limit named: a test image with Python for the engine double.
  printf 'FROM localhost/loch:ci\nUSER root\nRUN apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends python3 >/dev/null && rm -rf /var/lib/apt/lists/*\nUSER loch\n' \
    >"$work/Containerfile.test"
  podman build --network host -q -t localhost/loch-test:ci -f "$work/Containerfile.test" "$work" >/dev/null
  cat >"$work/grow.yaml" <<YAML
listen: 0.0.0.0
port: $port
api_keys_file: /run/secrets/loch-api-keys
state_dir: /var/lib/loch
models:
  - name: grower
    engine: command
    memory: 100MiB
    command:
      argv: [python3, /doubles/growing_server.py, "{port}", "700", "700"]
  - name: too-big
    engine: command
    memory: 600MiB
    command:
      argv: [python3, /doubles/growing_server.py, "{port}", "1", "1"]
YAML
  chmod 0644 "$work/grow.yaml"
  m=loch-ci-mem-$$
  containers+=("$m")
  podman run -d --name "$m" --network host --memory 512m -v "$work/keys:/run/secrets/loch-api-keys:ro" \
    -v "$work/grow.yaml:/etc/loch/grow.yaml:ro" -v "$ROOT/tests/doubles:/doubles:ro" \
    localhost/loch-test:ci serve --config /etc/loch/grow.yaml >/dev/null
  wait_health "$port" "$m"
  # The limit is the CPU's capacity: a model that cannot fit under it is refused before it starts.
  code=$(curl -s -o "$work/refused.json" -w '%{http_code}' -H "Authorization: Bearer $key" \
    -H 'Content-Type: application/json' -d '{"model":"too-big","messages":[{"role":"user","content":"hi"}]}' \
    "http://127.0.0.1:$port/v1/chat/completions")
  echo "    HTTP $code: $(head -c 400 "$work/refused.json")…"
  python3 - "$work/refused.json" "$code" <<'PY'
import json, sys
body = json.load(open(sys.argv[1]))
assert sys.argv[2] == "503" and body["error"]["type"] == "insufficient_memory", (sys.argv[2], body)
assert "cgroup" in json.dumps(body), body
PY
  ok "a model above the 512 MiB limit is refused before it starts (503 insufficient_memory, the cgroup named)"
  code=$(curl -s -o "$work/killed.json" -w '%{http_code}' -H "Authorization: Bearer $key" \
    -H 'Content-Type: application/json' -d '{"model":"grower","messages":[{"role":"user","content":"grow"}]}' \
    "http://127.0.0.1:$port/v1/chat/completions")
  echo "    HTTP $code: $(cat "$work/killed.json")"
  python3 - "$work/killed.json" "$code" <<'PY'
import json, sys
e = json.load(open(sys.argv[1]))["error"]
assert sys.argv[2].startswith("5"), sys.argv[2]
msg = e["message"]
assert "killed by the container's memory limit 512.0 MiB (oom_kill 0→1" in msg, msg
# The reservation is the configured 100 MiB, or what loch measured while the engine grew (the runtime guard
# raises it to measured use at once): whichever the last sample before the kill gave, never less than asked.
# (A sample of the process can read above the cgroup's own figure: 514.4 MiB booked, 509.3 MiB "used".)
import re
m = re.search(r"against a ([0-9.]+) MiB reservation", msg)
assert m and float(m.group(1)) >= 100.0, msg
kill = e["details"]["exit"]["oom_kill"] if "details" in e else e["exit"]["oom_kill"]
assert kill["limit_bytes"] == 512 << 20 and kill["after"] == kill["before"] + 1, kill
assert kill["used_bytes"] > 400 << 20, kill
assert kill["reserved_bytes"] >= 100 << 20, kill
PY
  curl -fsS "http://127.0.0.1:$port/health" >/dev/null || fail "loch stopped answering after the kill"
  [[ $(podman inspect -f '{{.State.Running}}' "$m") == true ]] || fail "the container ended with its engine"
  ok "an engine grown past --memory 512m is named: the limit, oom_kill 0→1, its use; loch still answers"
fi
echo "    deployment checks passed"
