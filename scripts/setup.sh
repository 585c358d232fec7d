#!/usr/bin/env bash
# Sets up what loch needs on a fresh Debian 12 machine (run as root) and is safe to run again:
#   1. finds the machine's GPUs (NVIDIA, AMD, others through Vulkan) and chooses the engine backends that can
#      run there: CUDA for NVIDIA (the machine's nvcc, for the compute capabilities found), ROCm for AMD where
#      a ROCm toolchain is installed (for the gfx targets found), Vulkan for AMD and any other GPU, and for an
#      NVIDIA GPU when CUDA is missing; --backend overrides the choice;
#   2. Debian packages for the build (and, with --all, for the tests, fuzzing and benchmarks);
#   3. the pinned engines, each for the CPU and each chosen backend, built once and cached by engine, version,
#      backend and targets: llama.cpp (source from npm node-llama-cpp@3.22.1) always; sd-server (PyPI
#      stable-diffusion-cpp-python) with --images; whisper-server (PyPI pywhispercpp) with --speech;
#   4. loch itself (build/bin/loch, build/bin/loch-synth) with the CPU engines beside it and each GPU build in
#      build/bin/<backend>/, compiled by clang++-19 (g++ 12 miscompiles Asio coroutine lambdas:
#      docs/toolchain.md); with --all also the test suites and benchmarks;
#   5. a generated demo model (models/demo.gguf) for `loch serve`'s embedded default.
# Without options it builds only what `loch serve` on its embedded default needs (the README's first command).
# --fetch-only does steps 1-3 without compiling anything: packages, the engines' sources, the tests' tools (with
# --all); scripts/test.sh uses it to run the pristine-container check before the builds here, so that they
# can take what the container built (scripts/test-pristine.sh).
#   bash scripts/setup.sh [--images] [--speech] [--all] [--backend cuda|vulkan|rocm|cpu]... [--fetch-only]
# (--all = everything the test command needs, which includes the Vulkan engines for the lavapipe checks.)
# Environment: LOCH_CUDA_ARCHS ("61;90") and LOCH_GPU_TARGETS ("gfx1151") override what the GPUs report.
# Each step says what it does, how long it took, and skips what is already done.
set -euo pipefail
# (The whole script is read before it runs: a checkout updated while it runs does not change it midway.)
{
WITH_IMAGES=0 WITH_SPEECH=0 WITH_TESTS=0 FETCH_ONLY=0
ASKED=()
while (($#)); do
  case $1 in
    --images) WITH_IMAGES=1 ;;
    --speech) WITH_SPEECH=1 ;;
    --all) WITH_IMAGES=1 WITH_SPEECH=1 WITH_TESTS=1 ;;
    --fetch-only) FETCH_ONLY=1 ;;
    --backend)
      case ${2:-} in cuda | vulkan | rocm | cpu) ASKED+=("$2") ;;
        *) echo "setup.sh: --backend takes cuda, vulkan, rocm or cpu (got '${2:-}')" >&2; exit 2 ;; esac
      shift ;;
    *) echo "setup.sh: unknown option '$1' (use --images, --speech, --all, --backend B, --fetch-only)" >&2; exit 2 ;;
  esac
  shift
done
SETUP_START=$SECONDS

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
CACHE=${LOCH_CACHE_DIR:-/var/cache/loch}
BUILD=${LOCH_BUILD_DIR:-$ROOT/build}
ENGINE_NPM=node-llama-cpp@3.22.1
JOBS=$(nproc)

step() { printf '\n==> %s  [%d s]\n' "$*" $((SECONDS - SETUP_START)); }
skip() { printf '    (skipped: %s)\n' "$*"; }

# ---------------------------------------------------------------- 1. GPUs and backends
step "GPUs and engine backends"
# shellcheck source=scripts/engines/gpus.sh
source "$ROOT/scripts/engines/gpus.sh"
find_gpus
choose_backends
echo "    backends: cpu${BACKENDS[*]:+ ${BACKENDS[*]}}"

# ---------------------------------------------------------------- 2. packages
PACKAGES=(build-essential g++-12 cmake ninja-build git pkg-config curl ca-certificates
  libboost1.81-dev libyaml-cpp-dev libcli11-dev libspdlog-dev libfmt-dev nlohmann-json3-dev
  clang-19 ccache prometheus-cpp-dev libsqlite3-dev libsqlitecpp-dev procps python3)
((WITH_IMAGES || WITH_SPEECH)) && PACKAGES+=(python3-pip)  # pip download of the engines' sdists
# The Vulkan backend's build needs its headers and shader compiler (Debian main).
[[ " ${BACKENDS[*]} " == *" vulkan "* ]] && PACKAGES+=(libvulkan-dev glslc spirv-headers)
((WITH_TESTS)) && PACKAGES+=(mesa-vulkan-drivers vulkan-tools  # lavapipe: a real Vulkan driver on the CPU
  libgtest-dev libgmock-dev libclang-rt-19-dev clang-format-14 nginx-light
  haproxy iproute2  # several boxes: network namespaces behind Debian's HAProxy (docs/several-boxes.md)
  python3-venv  # test peers: a test double of vLLM; the ollama client and Prometheus' parser (venv)
  chromium-headless-shell fonts-dejavu-core)  # the dashboard's browser test
step "Debian packages"
missing=()
for p in "${PACKAGES[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if dpkg-query -W -f='${Status}' libboost1.74-dev 2>/dev/null | grep -q "install ok installed"; then
  echo "    removing libboost1.74-dev (conflicts with libboost1.81-dev)"
  DEBIAN_FRONTEND=noninteractive apt-get remove -y -qq libboost1.74-dev
fi
# npm (to fetch the engine source) may come from Debian or from a Node.js install already on the machine.
command -v npm >/dev/null || missing+=(npm)
if ((${#missing[@]})); then
  echo "    installing: ${missing[*]}"
  apt-get update -qq
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "${missing[@]}"
else
  skip "all ${#PACKAGES[@]} present"
fi
# nginx and HAProxy are only test peers: never leave the distribution's default services running.
for svc in nginx haproxy; do
  if command -v systemctl >/dev/null && systemctl is-active --quiet "$svc" 2>/dev/null; then systemctl stop "$svc" || true; fi
done

# ---------------------------------------------------------------- 3. engines
# Each pinned engine is built for the CPU and for every backend chosen above (scripts/engines/build.sh knows
# the flags), once, and cached by engine, version, backend, targets and the build's own files. The CPU build
# goes to build/bin/, each GPU build to build/bin/<backend>/, each folder with an engine-build.json that tells
# loch which backend its binaries reach (docs/engine-build.md).
mkdir -p "$CACHE/src"
BUILD_FLAVOR=$(cat "$ROOT/scripts/engines/build.sh" "$ROOT/scripts/engines/llama-build.cmake" | sha256sum | cut -c1-8)
# A failed registry fetch says which one and what to check (set -e alone would end the script without a word).
fetch_failed() {
  echo "setup.sh: fetching $1 failed ($2). Check that this machine reaches that registry (npm's settings:" \
    "npm config get registry; pip's: pip config list) and re-run." >&2
  exit 1
}
# engine_source ENGINE: sets SRC_DIR to the source tree of a pinned engine, fetching and unpacking it once.
# (Globals, not $(…): a failure inside a command substitution would not end the script.)
engine_source() {
  case $1 in
    llama)
      local bundle=$CACHE/llama.cpp.bundle src=$CACHE/llama.cpp-src
      if [[ ! -s $bundle ]]; then
        local tmp; tmp=$(mktemp -d)
        (cd "$tmp" && npm pack --silent "$ENGINE_NPM" >/dev/null) ||
          fetch_failed "$ENGINE_NPM from npm's registry" "npm pack $ENGINE_NPM"
        tar xzf "$tmp"/node-llama-cpp-*.tgz -C "$tmp" package/llama/gitRelease.bundle
        mv "$tmp/package/llama/gitRelease.bundle" "$bundle"
        rm -rf "$tmp"
        echo "    fetched $(du -h "$bundle" | cut -f1) llama.cpp bundle"
      fi
      [[ -d $src/.git ]] || git clone -q "$bundle" "$src" 2>/dev/null
      SRC_DIR=$src ;;
    sd | whisper)
      local pin package vendored
      if [[ $1 == sd ]]; then pin=$SD_PYPI package=stable-diffusion-cpp-python vendored=vendor/stable-diffusion.cpp
      else pin=$WHISPER_PYPI package=pywhispercpp vendored=whisper.cpp; fi
      local dir=$CACHE/src/${pin/==/-}
      if [[ ! -d $dir/src ]]; then
        local tmp; tmp=$(mktemp -d)
        # (--no-binary for this package only: its build backend may come as a wheel, else pip builds the
        # whole backend chain from source)
        /usr/bin/python3 -m pip download --quiet --disable-pip-version-check --no-deps --no-binary "$package" \
          "$pin" -d "$tmp" || fetch_failed "$pin from PyPI" "pip download $pin"
        tar xzf "$tmp"/*.tar.gz -C "$tmp"
        rm -rf "$dir" && mkdir -p "$dir"
        mv "$(echo "$tmp"/*/"$vendored")" "$dir/src"
        rm -rf "$tmp"
      fi
      SRC_DIR=$dir/src ;;
  esac
}
# build_engine ENGINE VERSION BACKEND: builds (or finds cached) one engine for one backend; sets ENGINE_OUT to
# its folder. An auto-chosen GPU backend whose build fails is skipped (ENGINE_OUT empty) with the log named;
# one the user asked for, or the CPU build, ends the script.
build_engine() {
  local engine=$1 version=$2 backend=$3 targets=""
  [[ $backend == cuda ]] && targets=$CUDA_ARCHS
  [[ $backend == rocm ]] && targets=$GPU_TARGETS
  # No Vulkan GPU here, only the test command's lavapipe: a llama build without the shader families only GPUs
  # run. (Not sd: stable-diffusion.cpp 0.4.7's ggml built that way aborted on its first image on lavapipe.)
  [[ $backend == vulkan && $engine == llama ]] && ((VULKAN_FOR_TESTS_ONLY)) && targets=lavapipe
  local key="$engine-$version-$backend${targets:+-${targets//;/_}}-$BUILD_FLAVOR"
  ENGINE_OUT=$CACHE/engines/$key
  if [[ -d $ENGINE_OUT && -n $(ls -A "$ENGINE_OUT" 2>/dev/null) ]]; then
    skip "$engine ($backend${targets:+ $targets}) cached at $ENGINE_OUT"
    return
  fi
  engine_source "$engine"
  echo "    building $engine $version for $backend${targets:+ ($targets)} with $JOBS jobs"
  local start=$SECONDS rc=0
  mkdir -p "$CACHE/build"
  # Every build folder and source tree lies under $CACHE: ccache's paths are relative to it, so the backends'
  # builds of one engine share what they compile alike (scripts/engines/build.sh).
  CCACHE_BASEDIR=$CACHE CCACHE_NOHASHDIR=1 JOBS=$JOBS BUILD_DIR=$CACHE/build/$key bash "$ROOT/scripts/engines/build.sh" "$engine" "$backend" "$SRC_DIR" \
    "$ENGINE_OUT" "$targets" || rc=$?
  if ((rc)); then
    [[ $backend == cpu || " ${ASKED[*]} " == *" $backend "* ]] && exit 1
    ((VULKAN_FOR_TESTS_ONLY)) && [[ $backend == vulkan ]] && exit 1  # the test command's lavapipe checks need it
    echo "    skipped: the $backend build of $engine failed (log above); run with --backend $backend to make" \
      "that an error"
    ENGINE_OUT=""
    return
  fi
  echo "    built in $((SECONDS - start)) s"
}

# The Vulkan toolchain the pinned ggml-vulkan needs: its code uses VK_EXT_layer_settings (Vulkan-Headers
# 1.3.261 and later) and its shaders cooperative matrices (a 2024 glslc); Debian 12 ships headers 1.3.239 and
# glslc 2023.2. Where the system's are older, Debian 13's headers, SPIRV-Headers and glslc are fetched by apt
# from Debian's archive and unpacked into the cache — nothing is installed: the headers are only read, and
# glslc runs at build time through Debian 13's own loader and libraries (a wrapper in bin/).
VULKAN_SDK_PKGS=(libvulkan-dev=1.4.309.0-1 spirv-headers=1.6.1+1.4.309.0-1 glslc=2025.2-1 libshaderc1=2025.2-1
  libc6 libstdc++6 libgcc-s1)
vulkan_sdk() {
  local have; have=$(sed -n 's/^#define VK_HEADER_VERSION \([0-9]*\)$/\1/p' /usr/include/vulkan/vulkan_core.h 2>/dev/null)
  VULKAN_SDK=""
  [[ ${have:-0} -ge 309 ]] && return
  VULKAN_SDK=$CACHE/vulkan-sdk-debian13
  [[ -x $VULKAN_SDK/bin/glslc ]] && return
  local apt=$CACHE/apt-debian13
  mkdir -p "$apt/lists/partial" "$apt/debs"
  echo 'deb [signed-by=/usr/share/keyrings/debian-archive-keyring.gpg] http://deb.debian.org/debian trixie main' \
    >"$apt/sources.list"
  local o=(-o "Dir::Etc::sourcelist=$apt/sources.list" -o Dir::Etc::sourceparts=- -o "Dir::State::Lists=$apt/lists")
  apt-get "${o[@]}" -qq update || fetch_failed "Debian 13's package lists" "apt-get update (trixie)"
  (cd "$apt/debs" && apt-get "${o[@]}" -qq download "${VULKAN_SDK_PKGS[@]}" 2>&1 | grep -v unsandboxed || true)
  ls "$apt"/debs/glslc_*.deb >/dev/null 2>&1 || fetch_failed "${VULKAN_SDK_PKGS[*]} from Debian 13" "apt-get download"
  rm -rf "$VULKAN_SDK" && mkdir -p "$VULKAN_SDK/bin"
  for d in "$apt"/debs/*.deb; do dpkg -x "$d" "$VULKAN_SDK"; done
  local lib=$VULKAN_SDK/usr/lib/x86_64-linux-gnu
  printf '#!/bin/sh\nexec "%s/ld-linux-x86-64.so.2" --library-path "%s" "%s/usr/bin/glslc" "$@"\n' "$lib" "$lib" \
    "$VULKAN_SDK" >"$VULKAN_SDK/bin/glslc"
  chmod +x "$VULKAN_SDK/bin/glslc"
  # (sed reads every line: `| head -1` could end the pipe while glslc still writes, and pipefail would end
  # the script on its SIGPIPE — which a cold run here did.)
  "$VULKAN_SDK/bin/glslc" --version | sed -n '1s/^/    Vulkan toolchain from Debian 13: /p'
}
VULKAN_SDK=""
[[ " ${BACKENDS[*]} " == *" vulkan "* ]] && vulkan_sdk
export VULKAN_SDK

# ---------------------------------------------------------------- 3c. Python test peers
# Real clients in the tests: Ollama's Python client and Prometheus' own text-format parser, pinned, in a venv
# from PyPI (cached; rebuilt only when the pins change).
PY_PINS="ollama==0.6.1 prometheus_client==0.23.1 openai==1.109.1 anthropic==2.10.0"
PYENV=$CACHE/py
python_peers() {
  if [[ -x $PYENV/bin/python3 && "$(cat "$PYENV/PINS" 2>/dev/null)" == "$PY_PINS" ]]; then
    skip "venv cached at $PYENV"
    return
  fi
  rm -rf "$PYENV"
  /usr/bin/python3 -m venv "$PYENV"
  # shellcheck disable=SC2086
  "$PYENV/bin/pip" install --quiet --disable-pip-version-check $PY_PINS ||
    fetch_failed "$PY_PINS from PyPI" "pip install $PY_PINS"
  echo "$PY_PINS" >"$PYENV/PINS"
  echo "    installed in $PYENV"
}

# ---------------------------------------------------------------- 3d. coding agents
# The coding agents people point at loch (issue 53): Claude Code and Codex, the official CLIs from npm, pinned,
# in a folder of their own (cached; reinstalled only when the pins change). Each ships its native binary as an
# npm package for the platform; nothing is fetched from elsewhere.
AGENT_PINS="@anthropic-ai/claude-code@2.1.332 @openai/codex@0.171.0"
AGENTS=$CACHE/agents
coding_agents() {
  if [[ -x $AGENTS/node_modules/.bin/claude && -x $AGENTS/node_modules/.bin/codex &&
    "$(cat "$AGENTS/PINS" 2>/dev/null)" == "$AGENT_PINS" ]]; then
    skip "installed in $AGENTS"
    return
  fi
  rm -rf "$AGENTS"
  mkdir -p "$AGENTS"
  # shellcheck disable=SC2086
  (cd "$AGENTS" && npm install --silent --no-audit --no-fund --prefix "$AGENTS" $AGENT_PINS) ||
    fetch_failed "$AGENT_PINS from npm's registry" "npm install $AGENT_PINS"
  echo "$AGENT_PINS" >"$AGENTS/PINS"
  echo "    installed in $AGENTS"
}

# The tests' downloads (3c, 3d: network and unpacking, little CPU) go on while the engines compile; each says
# how it went after the engines (on a cold machine this hides a minute or two of the test command's setup).
BACKGROUND=()  # "pid:log:title" of each download running beside the builds
in_background() {  # in_background TITLE FUNCTION
  local log; log=$(mktemp)
  "$2" >"$log" 2>&1 &
  BACKGROUND+=("$!:$log:$1")
}
finish_background() {
  local job pid log title rc
  for job in "${BACKGROUND[@]}"; do
    IFS=: read -r pid log title <<<"$job"
    step "$title"
    rc=0
    wait "$pid" || rc=$?
    cat "$log"
    rm -f "$log"
    ((rc == 0)) || exit "$rc"
  done
  BACKGROUND=()
}
if ((WITH_TESTS)); then
  in_background "Python test peers ($PY_PINS)" python_peers
  in_background "Coding agents for the tests ($AGENT_PINS)" coding_agents
fi

ENGINES=(llama)
((WITH_IMAGES)) && ENGINES+=(sd)
((WITH_SPEECH)) && ENGINES+=(whisper)
SD_PYPI=stable-diffusion-cpp-python==0.4.7
WHISPER_PYPI=pywhispercpp==1.5.1
declare -A BUILT  # backend → "engine:folder ..."
for backend in cpu "${BACKENDS[@]}"; do
  step "Pinned engines for $backend (${ENGINES[*]})"
  for engine in "${ENGINES[@]}"; do
    [[ $backend == vulkan && $engine == whisper ]] && ((VULKAN_FOR_TESTS_ONLY)) && continue
    case $engine in
      llama) engine_source llama && version=$(git -C "$SRC_DIR" rev-parse --short=7 HEAD) ;;
      sd) version=${SD_PYPI#*==} ;;
      whisper) version=${WHISPER_PYPI#*==} ;;
    esac
    if ((FETCH_ONLY)); then
      engine_source "$engine"
      skip "$engine ($backend): --fetch-only, its source is in $SRC_DIR"
      continue
    fi
    build_engine "$engine" "$version" "$backend"
    [[ -n $ENGINE_OUT ]] && BUILT[$backend]+="$engine:$version:$ENGINE_OUT "
  done
done
((WITH_IMAGES)) || skip "the image engine (sd-server) not asked for (--images or --all builds it, about 6 minutes on 2 cores)"
((WITH_SPEECH)) || skip "the speech engine (whisper-server) not asked for (--speech or --all, about 3 minutes on 2 cores)"
if ((WITH_TESTS)); then
  finish_background
else
  step "Python test peers and coding agents"
  skip "not asked for (--all)"
fi

# ---------------------------------------------------------------- 3e. deployment checks' tools
step "Deployment checks' tools (podman, helm, kubernetes-validate, yamllint: scripts/setup-deploy.sh)"
if ((WITH_TESTS)); then
  bash "$ROOT/scripts/setup-deploy.sh"
else
  skip "not asked for (--all)"
fi

if ((FETCH_ONLY)); then
  echo
  echo "fetched in $((SECONDS - SETUP_START)) s; nothing compiled (--fetch-only): run it again without to build"
  exit 0
fi

# ---------------------------------------------------------------- 4. loch
step "Building loch"
# -O2 without debug info: the Beast templates compile much faster without it on small machines. ccache
# (keyed relative to the checkout) makes a rebuild in another clone on the same machine cheap. The test
# suites are not part of this build: scripts/test.sh builds them once, sanitized (build-asan/), where they
# run — on 2 cores their compile is ~60 % of a build (a developer's own: -DLOCH_BUILD_TESTS=ON).
export CCACHE_BASEDIR=$ROOT CCACHE_NOHASHDIR=1
cmake -S "$ROOT" -B "$BUILD" -G Ninja -DCMAKE_BUILD_TYPE=Release -DCMAKE_CXX_FLAGS_RELEASE="-O2 -DNDEBUG" \
  -DCMAKE_CXX_COMPILER=clang++-19 -DCMAKE_CXX_COMPILER_LAUNCHER=ccache -DLOCH_WERROR=ON \
  -DLOCH_BUILD_TESTS="${LOCH_BUILD_TESTS:-OFF}" >/dev/null
if ((WITH_TESTS)); then
  cmake --build "$BUILD" -j "$JOBS"  # loch, loch-synth and the benches (scripts/test.sh runs some)
else
  cmake --build "$BUILD" -j "$JOBS" --target loch loch-synth  # what `loch serve` needs
fi
# The engines: the CPU builds beside loch, each GPU build in its backend's folder, and in each folder the
# engine-build.json that tells loch which backend those binaries reach (config/engine_builds.hpp).
for backend in cpu "${BACKENDS[@]}"; do
  dir=$BUILD/bin
  [[ $backend == cpu ]] || dir=$BUILD/bin/$backend
  mkdir -p "$dir"
  targets=""
  [[ $backend == cuda ]] && targets=$CUDA_ARCHS
  [[ $backend == rocm ]] && targets=$GPU_TARGETS
  entries=""
  for built in ${BUILT[$backend]:-}; do
    IFS=: read -r engine version folder <<<"$built"
    for b in "$folder"/*; do
      cp -f "$b" "$dir/"
      entries+="${entries:+,}\"$(basename "$b")\": \"$engine $version\""
    done
  done
  printf '{"backend": "%s", "targets": "%s", "engines": {%s}}\n' "$backend" "$targets" "$entries" >"$dir/engine-build.json"
  echo "    $dir: $(cd "$dir" && find . -maxdepth 1 -type f -perm -u+x -printf '%f ' | sort)"
done

# ---------------------------------------------------------------- 5. demo model
step "Demo model"
mkdir -p "$ROOT/models"
if [[ ! -s $ROOT/models/demo.gguf ]]; then
  "$BUILD/bin/loch-synth" --preset demo --out "$ROOT/models/demo.gguf"
else
  skip "models/demo.gguf exists"
fi
echo
echo "loch is set up in $((SECONDS - SETUP_START)) s: $BUILD/bin/loch"
exit 0
}
