#!/usr/bin/env bash
# Sets up what loch needs on a fresh Debian 12 machine (run as root) and is safe to run again:
#   1. Debian packages for the build (and, with --all, for the tests, fuzzing and benchmarks);
#   2. the pinned engines, built once and cached by version: llama.cpp (source from npm node-llama-cpp@3.22.1)
#      always; sd-server (PyPI stable-diffusion-cpp-python) with --images; whisper-server (PyPI pywhispercpp)
#      with --speech;
#   3. loch itself (build/bin/loch, build/bin/loch-synth) with the engine binaries copied beside it, compiled
#      by clang++-19 (g++ 12 miscompiles Asio coroutine lambdas: docs/toolchain.md); with --all also the test
#      suites and benchmarks;
#   4. a generated demo model (models/demo.gguf) for `loch serve`'s embedded default.
# Without options it builds only what `loch serve` on its embedded default needs (the README's first command).
#   bash scripts/setup.sh [--images] [--speech] [--all]      (--all = everything the test command needs)
# Each step says what it does, how long it took, and skips what is already done.
set -euo pipefail

WITH_IMAGES=0 WITH_SPEECH=0 WITH_TESTS=0
for arg in "$@"; do
  case $arg in
    --images) WITH_IMAGES=1 ;;
    --speech) WITH_SPEECH=1 ;;
    --all) WITH_IMAGES=1 WITH_SPEECH=1 WITH_TESTS=1 ;;
    *) echo "setup.sh: unknown option '$arg' (use --images, --speech, --all)" >&2; exit 2 ;;
  esac
done
SETUP_START=$SECONDS

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
CACHE=${LOCH_CACHE_DIR:-/var/cache/loch}
BUILD=${LOCH_BUILD_DIR:-$ROOT/build}
ENGINE_NPM=node-llama-cpp@3.22.1
JOBS=$(nproc)

step() { printf '\n==> %s  [%d s]\n' "$*" $((SECONDS - SETUP_START)); }
skip() { printf '    (skipped: %s)\n' "$*"; }

# ---------------------------------------------------------------- 1. packages
PACKAGES=(build-essential g++-12 cmake ninja-build git pkg-config curl ca-certificates
  libboost1.81-dev libyaml-cpp-dev libcli11-dev libspdlog-dev libfmt-dev nlohmann-json3-dev
  clang-19 ccache prometheus-cpp-dev libsqlite3-dev libsqlitecpp-dev procps python3)
((WITH_IMAGES || WITH_SPEECH)) && PACKAGES+=(python3-pip)  # pip download of the engines' sdists
((WITH_TESTS)) && PACKAGES+=(libgtest-dev libgmock-dev libclang-rt-19-dev clang-format-14 nginx-light
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

# ---------------------------------------------------------------- 2. engine
step "Pinned engine: llama.cpp from $ENGINE_NPM"
mkdir -p "$CACHE"
BUNDLE=$CACHE/llama.cpp.bundle
if [[ ! -s $BUNDLE ]]; then
  tmp=$(mktemp -d)
  (cd "$tmp" && npm pack --silent "$ENGINE_NPM" >/dev/null && tar xzf node-llama-cpp-*.tgz package/llama/gitRelease.bundle)
  mv "$tmp/package/llama/gitRelease.bundle" "$BUNDLE"
  rm -rf "$tmp"
  echo "    fetched $(du -h "$BUNDLE" | cut -f1) bundle"
else
  skip "bundle cached at $BUNDLE"
fi
SRC=$CACHE/llama.cpp-src
[[ -d $SRC/.git ]] || git clone -q "$BUNDLE" "$SRC"
COMMIT=$(git -C "$SRC" rev-parse HEAD)
# The build's flags (below, and scripts/engines/llama-build.cmake: kernels at -O3, the rest at -O1) are part of
# the cache key: changing them rebuilds the engine once.
TUNING=$ROOT/scripts/engines/llama-build.cmake
# ggml's own thread pool, as for sd-server and whisper-server (clang-19 has no OpenMP runtime here).
LLAMA_FLAGS=(-DCMAKE_BUILD_TYPE=Release -DBUILD_SHARED_LIBS=OFF -DCMAKE_C_COMPILER=clang-19
  -DCMAKE_CXX_COMPILER=clang++-19 -DGGML_NATIVE=OFF -DGGML_OPENMP=OFF -DLLAMA_CURL=OFF -DLLAMA_OPENSSL=OFF
  -DLLAMA_BUILD_TESTS=OFF -DLLAMA_BUILD_EXAMPLES=OFF -DLLAMA_USE_PREBUILT_UI=OFF -DLLAMA_BUILD_UI=OFF)
FLAVOR=$( (cat "$TUNING"; echo "${LLAMA_FLAGS[*]}") | sha256sum | cut -c1-8)
ENGINE=$CACHE/llama.cpp-$COMMIT-$FLAVOR
if [[ ! -x $ENGINE/bin/llama-server || ! -x $ENGINE/bin/llama-fit-params ]]; then
  echo "    building llama.cpp ${COMMIT:0:7} (static, CPU) with $JOBS jobs; about 4 minutes on 2 cores"
  start=$SECONDS
  rm -rf "$SRC/build"
  cmake -S "$SRC" -B "$SRC/build" -G Ninja "${LLAMA_FLAGS[@]}" -DCMAKE_PROJECT_INCLUDE="$TUNING" >/dev/null
  cmake --build "$SRC/build" -j "$JOBS" --target llama-server llama-fit-params >/dev/null
  mkdir -p "$ENGINE/bin.tmp"
  cp "$SRC/build/bin/llama-server" "$SRC/build/bin/llama-fit-params" "$ENGINE/bin.tmp/"
  rm -rf "$ENGINE/bin" && mv "$ENGINE/bin.tmp" "$ENGINE/bin"
  echo "$COMMIT" >"$ENGINE/COMMIT"
  echo "    built in $((SECONDS - start)) s"
else
  skip "llama.cpp ${COMMIT:0:7} cached at $ENGINE"
fi

# ---------------------------------------------------------------- 2a. image engine
# stable-diffusion.cpp's sd-server, from the source the PyPI sdist vendors (pip's normal client, download only),
# built once for the CPU and cached by version: static, ggml's own thread pool (no OpenMP), no web frontend
# (it would run pnpm), no WebP/WebM (less to compile). About 155 s on 2 idle cores.
SD_PYPI=stable-diffusion-cpp-python==0.4.7
SD_ENGINE=$CACHE/sd-server-${SD_PYPI#*==}
step "Pinned image engine: stable-diffusion.cpp sd-server from PyPI $SD_PYPI"
if ((!WITH_IMAGES)); then
  skip "not asked for (--images or --all builds it, about 6 minutes on 2 cores)"
elif [[ -x $SD_ENGINE/bin/sd-server ]]; then
  skip "sd-server cached at $SD_ENGINE"
else
  tmp=$(mktemp -d)
  # (--no-binary for this package only: its build backend may come as a wheel, else pip builds the whole
  # backend chain from source)
  /usr/bin/python3 -m pip download --quiet --disable-pip-version-check --no-deps --no-binary stable-diffusion-cpp-python \
    "$SD_PYPI" -d "$tmp"
  tar xzf "$tmp"/stable_diffusion_cpp_python-*.tar.gz -C "$tmp"
  sd_src=$(echo "$tmp"/stable_diffusion_cpp_python-*/vendor/stable-diffusion.cpp)
  start=$SECONDS
  cmake -S "$sd_src" -B "$tmp/build" -G Ninja -DCMAKE_BUILD_TYPE=Release -DBUILD_SHARED_LIBS=OFF -DGGML_NATIVE=OFF \
    -DGGML_OPENMP=OFF -DSD_SERVER_BUILD_FRONTEND=OFF -DSD_WEBP=OFF -DSD_WEBM=OFF -DCMAKE_EXE_LINKER_FLAGS=-static >/dev/null
  cmake --build "$tmp/build" -j "$JOBS" --target sd-server >/dev/null
  mkdir -p "$SD_ENGINE/bin.tmp"
  cp "$tmp/build/bin/sd-server" "$SD_ENGINE/bin.tmp/"
  rm -rf "$SD_ENGINE/bin" && mv "$SD_ENGINE/bin.tmp" "$SD_ENGINE/bin"
  echo "$SD_PYPI" >"$SD_ENGINE/SOURCE"
  rm -rf "$tmp"
  echo "    built in $((SECONDS - start)) s"
fi

# ---------------------------------------------------------------- 2b. speech engine
# whisper.cpp's whisper-server, from the source the PyPI sdist pywhispercpp vendors (download only), built once
# for the CPU and cached by version like sd-server: static, no OpenMP, only the server target.
WHISPER_PYPI=pywhispercpp==1.5.1
WHISPER_ENGINE=$CACHE/whisper-server-${WHISPER_PYPI#*==}
step "Pinned speech engine: whisper.cpp whisper-server from PyPI $WHISPER_PYPI"
if ((!WITH_SPEECH)); then
  skip "not asked for (--speech or --all builds it, about 3 minutes on 2 cores)"
elif [[ -x $WHISPER_ENGINE/bin/whisper-server ]]; then
  skip "whisper-server cached at $WHISPER_ENGINE"
else
  tmp=$(mktemp -d)
  /usr/bin/python3 -m pip download --quiet --disable-pip-version-check --no-deps --no-binary pywhispercpp \
    "$WHISPER_PYPI" -d "$tmp"
  tar xzf "$tmp"/pywhispercpp-*.tar.gz -C "$tmp"
  whisper_src=$(echo "$tmp"/pywhispercpp-*/whisper.cpp)
  start=$SECONDS
  cmake -S "$whisper_src" -B "$tmp/build" -G Ninja -DCMAKE_BUILD_TYPE=Release -DBUILD_SHARED_LIBS=OFF \
    -DGGML_NATIVE=OFF -DGGML_OPENMP=OFF -DWHISPER_BUILD_TESTS=OFF -DWHISPER_BUILD_EXAMPLES=ON \
    -DWHISPER_BUILD_SERVER=ON -DWHISPER_SDL2=OFF -DWHISPER_CURL=OFF -DCMAKE_EXE_LINKER_FLAGS=-static >/dev/null
  cmake --build "$tmp/build" -j "$JOBS" --target whisper-server >/dev/null
  mkdir -p "$WHISPER_ENGINE/bin.tmp"
  cp "$tmp/build/bin/whisper-server" "$WHISPER_ENGINE/bin.tmp/"
  rm -rf "$WHISPER_ENGINE/bin" && mv "$WHISPER_ENGINE/bin.tmp" "$WHISPER_ENGINE/bin"
  echo "$WHISPER_PYPI" >"$WHISPER_ENGINE/SOURCE"
  rm -rf "$tmp"
  echo "    built in $((SECONDS - start)) s"
fi

# ---------------------------------------------------------------- 2c. Python test peers
# Real clients in the tests: Ollama's Python client and Prometheus' own text-format parser, pinned, in a venv
# from PyPI (cached; rebuilt only when the pins change).
PY_PINS="ollama==0.6.1 prometheus_client==0.23.1 openai==1.109.1 anthropic==2.10.0"
PYENV=$CACHE/py
step "Python test peers ($PY_PINS)"
if ((!WITH_TESTS)); then
  skip "not asked for (--all)"
elif [[ -x $PYENV/bin/python3 && "$(cat "$PYENV/PINS" 2>/dev/null)" == "$PY_PINS" ]]; then
  skip "venv cached at $PYENV"
else
  rm -rf "$PYENV"
  /usr/bin/python3 -m venv "$PYENV"
  # shellcheck disable=SC2086
  "$PYENV/bin/pip" install --quiet --disable-pip-version-check $PY_PINS
  echo "$PY_PINS" >"$PYENV/PINS"
fi

# ---------------------------------------------------------------- 2d. deployment checks' tools
step "Deployment checks' tools (podman, helm, kubernetes-validate, yamllint: scripts/setup-deploy.sh)"
if ((WITH_TESTS)); then
  bash "$ROOT/scripts/setup-deploy.sh"
else
  skip "not asked for (--all)"
fi

# ---------------------------------------------------------------- 3. loch
step "Building loch"
# -O2 without debug info: the Beast templates compile much faster without it on small machines. ccache
# (keyed relative to the checkout) makes a rebuild in another clone on the same machine cheap.
export CCACHE_BASEDIR=$ROOT CCACHE_NOHASHDIR=1
cmake -S "$ROOT" -B "$BUILD" -G Ninja -DCMAKE_BUILD_TYPE=Release -DCMAKE_CXX_FLAGS_RELEASE="-O2 -DNDEBUG" \
  -DCMAKE_CXX_COMPILER=clang++-19 -DCMAKE_CXX_COMPILER_LAUNCHER=ccache -DLOCH_WERROR=ON >/dev/null
if ((WITH_TESTS)); then
  cmake --build "$BUILD" -j "$JOBS"
else
  cmake --build "$BUILD" -j "$JOBS" --target loch loch-synth  # what `loch serve` needs; tests come with --all
fi
cp -f "$ENGINE/bin/llama-server" "$ENGINE/bin/llama-fit-params" "$BUILD/bin/"
for e in "$SD_ENGINE/bin/sd-server" "$WHISPER_ENGINE/bin/whisper-server"; do
  [[ -x $e ]] && cp -f "$e" "$BUILD/bin/"
done
echo "    $BUILD/bin: $(ls "$BUILD/bin" | tr '\n' ' ')"

# ---------------------------------------------------------------- 4. demo model
step "Demo model"
mkdir -p "$ROOT/models"
if [[ ! -s $ROOT/models/demo.gguf ]]; then
  "$BUILD/bin/loch-synth" --preset demo --out "$ROOT/models/demo.gguf"
else
  skip "models/demo.gguf exists"
fi
echo
echo "loch is set up in $((SECONDS - SETUP_START)) s: $BUILD/bin/loch"
