# Sourced by scripts/setup.sh: which GPUs this machine has and which engine backends to build for them.
# It reads what `loch devices` reads (loch is not built yet when it runs): NVIDIA through nvidia-smi (the
# compute capability of each GPU), AMD through the KFD topology (each GPU's gfx target) and sysfs, any other
# display controller (Intel, a GPU whose driver is not loaded) through sysfs. LOCH_SYSROOT points the sysfs
# reads at a captured tree (tests); LOCH_CUDA_ARCHS and LOCH_GPU_TARGETS override what the GPUs report.
#
# find_gpus sets NVIDIA_GPUS, CUDA_ARCHS ("61;90"), AMD_GPUS, GPU_TARGETS ("gfx1151"), OTHER_GPUS;
# choose_backends sets BACKENDS (the GPU backends to build, besides the CPU) from them and from ASKED (the
# --backend options), and says in one line per backend it leaves out what to install and how to re-run.

SYSROOT=${LOCH_SYSROOT:-}

find_gpus() {
  NVIDIA_GPUS=0 AMD_GPUS=0 OTHER_GPUS=0 CUDA_ARCHS="" GPU_TARGETS=""
  local caps=""
  if command -v nvidia-smi >/dev/null 2>&1 && [[ -z $SYSROOT ]]; then
    caps=$(nvidia-smi --query-gpu=compute_cap --format=csv,noheader 2>/dev/null | tr -d ' .' | grep -E '^[0-9]+$' || true)
  fi
  if [[ -n $caps ]]; then
    NVIDIA_GPUS=$(wc -l <<<"$caps")
    CUDA_ARCHS=$(sort -un <<<"$caps" | paste -sd';')
  elif compgen -G "$SYSROOT/proc/driver/nvidia/gpus/*" >/dev/null; then
    NVIDIA_GPUS=$(find "$SYSROOT/proc/driver/nvidia/gpus" -mindepth 1 -maxdepth 1 | wc -l)
  fi
  # AMD: each KFD node with a GPU names its target as major*10000 + minor*100 + stepping (gfx1151 = 110501,
  # gfx90a = 90010: the stepping is one hex digit).
  local node v targets=""
  for node in "$SYSROOT"/sys/class/kfd/kfd/topology/nodes/*/properties; do
    [[ -r $node ]] || continue
    v=$(awk '$1 == "gfx_target_version" {print $2}' "$node")
    [[ -n $v && $v != 0 ]] || continue
    AMD_GPUS=$((AMD_GPUS + 1))
    targets+=$(printf 'gfx%d%d%x\n' $((v / 10000)) $((v / 100 % 100)) $((v % 100)))$'\n'
  done
  GPU_TARGETS=$(grep . <<<"$targets" | sort -u | paste -sd';' || true)
  # Display controllers (PCI class 0x03xxxx) that are neither NVIDIA's nor AMD's: Vulkan is their backend.
  local dev class vendor
  for dev in "$SYSROOT"/sys/bus/pci/devices/*; do
    [[ -r $dev/class && -r $dev/vendor ]] || continue
    class=$(<"$dev/class") vendor=$(<"$dev/vendor")
    [[ $class == 0x03* ]] || continue
    case $vendor in
      0x10de) ((NVIDIA_GPUS)) || NVIDIA_GPUS=1 ;;  # a driver that is not loaded still leaves the PCI device
      0x1002) ((AMD_GPUS)) || AMD_GPUS=1 ;;
      0x1af4 | 0x1234 | 0x1b36 | 0x15ad) ;;       # virtual display adapters (virtio, QEMU, VMware): no GPU
      *) OTHER_GPUS=$((OTHER_GPUS + 1)) ;;
    esac
  done
  CUDA_ARCHS=${LOCH_CUDA_ARCHS:-$CUDA_ARCHS}
  GPU_TARGETS=${LOCH_GPU_TARGETS:-$GPU_TARGETS}
  echo "    GPUs: NVIDIA $NVIDIA_GPUS${CUDA_ARCHS:+ (compute $CUDA_ARCHS)}, AMD $AMD_GPUS${GPU_TARGETS:+ ($GPU_TARGETS)}, other $OTHER_GPUS"
}

# The CUDA compiler: on PATH, or where NVIDIA's installer puts it.
find_nvcc() {
  command -v nvcc >/dev/null 2>&1 && return 0
  [[ -x /usr/local/cuda/bin/nvcc ]] && { export PATH=/usr/local/cuda/bin:$PATH; return 0; }
  return 1
}
# ROCm: its compiler driver and the BLAS libraries ggml's HIP backend links (hipBLAS, rocBLAS).
find_rocm() {
  command -v hipconfig >/dev/null 2>&1 || [[ -x /opt/rocm/bin/hipconfig ]] || return 1
  command -v hipconfig >/dev/null 2>&1 || export PATH=/opt/rocm/bin:$PATH
  local prefix; prefix=$(hipconfig -p 2>/dev/null || echo /opt/rocm)
  compgen -G "$prefix/lib*/cmake/hipblas" >/dev/null || compgen -G "/usr/lib/*/cmake/hipblas" >/dev/null
}

choose_backends() {
  BACKENDS=()
  local want=() b
  if ((${#ASKED[@]})); then
    for b in "${ASKED[@]}"; do [[ $b == cpu ]] || want+=("$b"); done
  else
    if ((NVIDIA_GPUS)); then
      if find_nvcc; then want+=(cuda); else
        echo "    CUDA: not built — no nvcc. For NVIDIA's own backend install a CUDA toolkit (NVIDIA's, or Debian's" \
          "nvidia-cuda-toolkit from the non-free component) and re-run: bash scripts/setup.sh --backend cuda." \
          "Until then the GPU gets the Vulkan build."
        want+=(vulkan)
      fi
    fi
    if ((AMD_GPUS)); then
      want+=(vulkan)
      if find_rocm; then want+=(rocm); else
        echo "    ROCm: not built — no ROCm toolchain (hipconfig and hipBLAS). The GPU gets the Vulkan build; for" \
          "ROCm install it (docs/strix-halo.md) and re-run: bash scripts/setup.sh --backend rocm"
      fi
    fi
    ((OTHER_GPUS)) && want+=(vulkan)
  fi
  # The lavapipe checks of the test command need the Vulkan chat and image engines (not the speech one).
  VULKAN_FOR_TESTS_ONLY=0
  if ((WITH_TESTS)) && [[ " ${want[*]} " != *" vulkan "* ]]; then want+=(vulkan) VULKAN_FOR_TESTS_ONLY=1; fi
  for b in "${want[@]}"; do [[ " ${BACKENDS[*]} " == *" $b "* ]] || BACKENDS+=("$b"); done
  # An asked-for backend whose toolchain is missing is an error: the user wants that engine.
  for b in "${ASKED[@]}"; do
    case $b in
      cuda)
        find_nvcc || { echo "setup.sh: --backend cuda needs nvcc: install a CUDA toolkit (NVIDIA's, or Debian's" \
          "nvidia-cuda-toolkit: add 'contrib non-free' to Components: in /etc/apt/sources.list.d/debian.sources," \
          "apt-get update, apt-get install nvidia-cuda-toolkit) and re-run." >&2; exit 1; }
        [[ -n $CUDA_ARCHS ]] || { echo "setup.sh: --backend cuda: no GPU reported its compute capability" \
          "(nvidia-smi); name them: LOCH_CUDA_ARCHS='61;90' bash scripts/setup.sh --backend cuda" >&2; exit 1; } ;;
      rocm)
        find_rocm || { echo "setup.sh: --backend rocm needs ROCm (hipconfig, hipBLAS): docs/strix-halo.md says" \
          "how to install it; then re-run." >&2; exit 1; }
        [[ -n $GPU_TARGETS ]] || { echo "setup.sh: --backend rocm: no GPU reported its gfx target; name it:" \
          "LOCH_GPU_TARGETS=gfx1151 bash scripts/setup.sh --backend rocm" >&2; exit 1; } ;;
    esac
  done
  # Auto-chosen CUDA with no reported compute capability: say so rather than guess one.
  if [[ " ${BACKENDS[*]} " == *" cuda "* && -z $CUDA_ARCHS ]]; then
    echo "    CUDA: not built — nvidia-smi reported no compute capability; name them and re-run:" \
      "LOCH_CUDA_ARCHS='61;90' bash scripts/setup.sh --backend cuda"
    BACKENDS=("${BACKENDS[@]/cuda/}")
  fi
  if [[ " ${BACKENDS[*]} " == *" rocm "* && -z $GPU_TARGETS ]]; then
    echo "    ROCm: not built — no GPU reported its gfx target; re-run with LOCH_GPU_TARGETS=gfx1151 --backend rocm"
    BACKENDS=("${BACKENDS[@]/rocm/}")
  fi
  local kept=()
  for b in "${BACKENDS[@]}"; do [[ -n $b ]] && kept+=("$b"); done
  BACKENDS=(${kept[@]+"${kept[@]}"})
}
