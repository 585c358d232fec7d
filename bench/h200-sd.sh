#!/usr/bin/env bash
# On the lent H200 (device tool): builds stable-diffusion.cpp's sd-server with CUDA from the same PyPI sdist
# the setup script uses (carried in devcarry-sd/ with loch-synth), times the build, and records sd.cpp's own buffer lines for
# Flux-shaped synthetic models (loch-synth --diffusion, carried) at several sizes: the GPU side of the diffusion
# planner's figures (docs/engine-build.md, docs/images.md).
#   bash bench/h200-sd.sh     (results in $OUT, or ./h200-sd-out)
set -euo pipefail
R=$(pwd)
C=${CARRY_DIR:-$R/devcarry-sd}  # the sdist and loch-synth, carried
OUT=${OUT:-$R/h200-sd-out}
W=/tmp/sd-h200
mkdir -p "$OUT" "$W"
tar xzf "$C/stable_diffusion_cpp_python-0.4.7.tar.gz" -C "$W"
SRC=$(echo "$W"/stable_diffusion_cpp_python-*/vendor/stable-diffusion.cpp)
start=$SECONDS
cmake -S "$SRC" -B "$W/build" -G Ninja -DCMAKE_BUILD_TYPE=Release -DSD_CUDA=ON -DCMAKE_CUDA_ARCHITECTURES=90 \
  -DGGML_NATIVE=OFF -DSD_SERVER_BUILD_FRONTEND=OFF -DSD_WEBP=OFF -DSD_WEBM=OFF >"$OUT/configure.log" 2>&1
cmake --build "$W/build" -j "$(nproc)" --target sd-server >"$OUT/build.log" 2>&1
echo "sd-server CUDA build: $((SECONDS - start)) s on $(nproc) cores" | tee "$OUT/build-time.txt"
M=$W/models
mkdir -p "$M"
for p in flux1-1block clip-l taef1; do "$C/loch-synth" --diffusion $p --type q8_0 --out "$M/$p.gguf" >/dev/null; done
"$W/build/bin/sd-server" --diffusion-model "$M/flux1-1block.gguf" --clip_l "$M/clip-l.gguf" --taesd "$M/taef1.gguf" \
  --listen-port 18090 -v --steps 1 >"$OUT/sd-server.log" 2>&1 &
pid=$!
for _ in $(seq 120); do curl -s -o /dev/null localhost:18090/ && break; sleep 1; done
for s in 512 1024 1536 2048; do
  curl -s -o /dev/null -w "${s}x${s}: HTTP %{http_code} in %{time_total} s\n" localhost:18090/v1/images/generations \
    -d "{\"prompt\":\"x\",\"size\":\"${s}x${s}\"}" | tee -a "$OUT/requests.txt"
done
kill $pid; wait $pid || true
grep -aE "total params|compute buffer size|generate_image [0-9]" "$OUT/sd-server.log" | sed 's/\x1b\[[0-9;]*[mK]//g' >"$OUT/buffers.txt" || true
tail -n 3 "$OUT/build.log" >>"$OUT/build-time.txt"
