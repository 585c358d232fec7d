#!/usr/bin/env bash
# On the lent H200 (device tool): the image planner against sd-server's real GPU memory. Builds sd-server with
# CUDA from the PyPI sdist once (kept in devcarry-sd/build while the machine stays warm), then runs
# bench/plan-accuracy-diffusion --gpu over Flux.1-dev-shaped and SD1.5 synthetic models at 512²…2048².
#   bash bench/h200-sd-accuracy.sh [CASES] [SIZES]   (devcarry-sd/ holds the sdist, loch-synth and
#                                                     plan-accuracy-diffusion; results in $OUT)
# BUILD_ONLY=1 builds sd-server and stops (to overlap the build with another job).
# Issue 26's product: CASES=flux1-dev+vae,flux1-dev-fa+vae,flux1-dev-tiling+vae,flux1-dev-fa-tiling+vae,sd1.5,
# sd1.5-fa,sd1.5-tiling,sd1.5-fa-tiling and SIZES with non-square ones (1344x768,3000x2000); each case also
# samples the idle engine after its answer (what sd-server keeps).
set -euo pipefail
R=$(pwd)
C=$R/devcarry-sd
OUT=${OUT:-$R/h200-sd-out}
CASES=${1:-flux1-dev+taef1,flux1-dev+vae,flux1-dev-fa+vae}
SIZES=${2:-512,1024,1536,2048}
mkdir -p "$OUT"
if [[ ! -x $C/build/bin/sd-server ]]; then
  W=/tmp/sd-h200
  mkdir -p "$W"
  tar xzf "$C/stable_diffusion_cpp_python-0.4.7.tar.gz" -C "$W"
  SRC=$(echo "$W"/stable_diffusion_cpp_python-*/vendor/stable-diffusion.cpp)
  cmake -S "$SRC" -B "$C/build" -G Ninja -DCMAKE_BUILD_TYPE=Release -DSD_CUDA=ON -DCMAKE_CUDA_ARCHITECTURES=90 \
    -DGGML_NATIVE=OFF -DSD_SERVER_BUILD_FRONTEND=OFF -DSD_WEBP=OFF -DSD_WEBM=OFF >"$OUT/configure.log" 2>&1
  cmake --build "$C/build" -j "$(nproc)" --target sd-server >"$OUT/build.log" 2>&1
fi
[[ -n ${BUILD_ONLY:-} ]] && exit 0
nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader | tee "$OUT/gpu.txt"
"$C/plan-accuracy-diffusion" --gpu --sd-server "$C/build/bin/sd-server" --synth "$C/loch-synth" \
  --cases "$CASES" --sizes "$SIZES" --work /tmp/sd-acc --jsonl "$OUT/accuracy.jsonl" --markdown "$OUT/accuracy.md" \
  | tee "$OUT/accuracy.txt" || true
for f in /tmp/sd-acc/*.log; do grep -aE "total params|compute buffer size|generate_image [0-9]|CUDA|error" "$f" \
  | sed 's/\x1b\[[0-9;]*[mK]//g' | head -20 >"$OUT/$(basename "$f" .log).lines" || true; done
