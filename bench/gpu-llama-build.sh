# Sourced by the GPU benches (bench/gpu-sweep.sh, bench/gpu-offload-host.sh): builds llama-server for
# this machine's CUDA GPU with the setup script's own build step, from the sources `bash bench/gpu-engines.sh
# --pack` carried (devcarry-gpu/llama.tar.xz), in the background and once per machine (gpu-work/ survives
# between calls while the machine is held), then waits for it until BUDGET_S. Needs R (the repository), W
# (its gpu-work/) and BUDGET_S; leaves llama-server and llama-fit-params in $W/out-llama, or exits 3.
export PATH=$PATH:/usr/local/cuda/bin
mkdir -p "$W/src/llama"
ARCH=$(nvidia-smi --query-gpu=compute_cap --format=csv,noheader | head -1 | tr -d ' .')
if [[ ! -x $W/out-llama/llama-server ]] && ! pgrep -f "engines/build.sh llama" >/dev/null; then
  [[ -f $W/src/llama/.unpacked ]] || { tar -xJf "$R/devcarry-gpu/llama.tar.xz" -C "$W/src/llama" && touch "$W/src/llama/.unpacked"; }
  setsid nohup env JOBS="$(nproc)" BUILD_DIR="$W/build-llama" bash "$R/scripts/engines/build.sh" llama cuda \
    "$W/src/llama" "$W/out-llama" "$ARCH" >"$W/build-llama.txt" 2>&1 </dev/null &
  echo "building llama-server for sm_$ARCH"
fi
while pgrep -f "engines/build.sh llama" >/dev/null && ((SECONDS < BUDGET_S)); do sleep 5; done
[[ -x $W/out-llama/llama-server ]] || { echo "build not done after $SECONDS s"; tail -5 "$W/build-llama.txt"; exit 3; }
echo "llama-server ready at $SECONDS s"
