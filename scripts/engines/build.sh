#!/usr/bin/env bash
# Builds one pinned engine for one backend from its source tree: the one place that knows each engine's
# CMake flags per backend. scripts/setup.sh calls it for every (engine, backend) it builds; on a machine
# without the package registries (a GPU machine offline) it runs as it is over carried sources.
#   bash scripts/engines/build.sh ENGINE BACKEND SRC OUT [TARGETS]
#     ENGINE   llama (llama-server + llama-fit-params) | sd (sd-server) | whisper (whisper-server)
#     BACKEND  cpu | cuda | vulkan | rocm
#     SRC      the engine's source tree (llama.cpp, the sdist's vendored stable-diffusion.cpp or whisper.cpp)
#     OUT      the folder the binaries are copied into (made; written only when the build succeeded)
#     TARGETS  cuda: compute capabilities as CMake takes them ("61;90"); rocm: gfx targets ("gfx1151");
#              vulkan: empty, or "lavapipe" for a build only a software driver runs (see below)
# Environment: JOBS (parallel compile jobs, default nproc), BUILD_DIR (default SRC/build-BACKEND),
# VULKAN_SDK (a folder with usr/include/vulkan, usr/share/cmake/SPIRV-Headers and bin/glslc newer than the
# system's: Debian 12's headers 1.3.239 lack VK_EXT_layer_settings and its glslc 2023.2 cooperative matrices,
# which the pinned ggml-vulkan uses; scripts/setup.sh provides one).
# CPU builds are static with clang-19 (docs/toolchain.md); GPU builds link their runtime (libcuda, libvulkan,
# the HIP runtime) dynamically and use the compiler the backend's toolchain accepts (nvcc's host compiler:
# the system c++; ROCm: its own clang; Vulkan: clang-19, as the CPU build).
# Through ccache where it is installed, with CCACHE_BASEDIR set to the folder that holds both SRC and
# BUILD_DIR (scripts/setup.sh: the engine cache): a Vulkan build then takes from the CPU build of the same
# engine every object whose preprocessed source is the same — ggml's CPU and base code and all of llama.cpp's
# own (ggml's GGML_USE_VULKAN reaches their command lines, not their code) — and compiles only its backend.
set -euo pipefail
ENGINE=${1:?engine: llama, sd or whisper} BACKEND=${2:?backend: cpu, cuda, vulkan or rocm}
SRC=${3:?source tree} OUT=${4:?output folder} TARGETS=${5:-}
JOBS=${JOBS:-$(nproc)}
HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
BUILD_DIR=${BUILD_DIR:-$SRC/build-$BACKEND}

common=(-G Ninja -DCMAKE_BUILD_TYPE=Release -DBUILD_SHARED_LIBS=OFF -DGGML_NATIVE=OFF -DGGML_OPENMP=OFF)
command -v ccache >/dev/null && common+=(-DCMAKE_C_COMPILER_LAUNCHER=ccache -DCMAKE_CXX_COMPILER_LAUNCHER=ccache)
clang19=(-DCMAKE_C_COMPILER=clang-19 -DCMAKE_CXX_COMPILER=clang++-19)
case $BACKEND in
  cpu) common+=("${clang19[@]}") ;;
  cuda)
    [[ -n $TARGETS ]] || { echo "build.sh: cuda needs TARGETS (compute capabilities, e.g. '61;90')" >&2; exit 2; }
    common+=(-DGGML_CUDA=ON "-DCMAKE_CUDA_ARCHITECTURES=$TARGETS") ;;
  vulkan)
    common+=(-DGGML_VULKAN=ON "${clang19[@]}")
    glslc=$(command -v glslc || true)
    if [[ -n ${VULKAN_SDK:-} ]]; then
      glslc=$VULKAN_SDK/bin/glslc
      common+=("-DVulkan_INCLUDE_DIR=$VULKAN_SDK/usr/include" "-DCMAKE_PREFIX_PATH=$VULKAN_SDK/usr")
    fi
    if [[ $TARGETS == lavapipe ]]; then
      # For a software driver only (the test command's lavapipe checks on a machine without a Vulkan GPU):
      # ggml-vulkan decides which shader families to compile by asking glslc to compile one feature test
      # each; a glslc that declines the cooperative-matrix, bfloat16 and fp8 tests leaves out the shader
      # families lavapipe cannot run (ggml checks the device's features at run time and would never pick
      # them), about half of the build's shader compiles.
      lean=$BUILD_DIR-glslc
      {
        echo '#!/bin/sh'
        echo 'for a in "$@"; do case $a in'
        echo '  */feature-tests/coopmat.comp) ext=GL_KHR_cooperative_matrix ;;'
        echo '  */feature-tests/coopmat2.comp) ext=GL_NV_cooperative_matrix2 ;;'
        echo '  */feature-tests/coopmat2_decode_vector.comp) ext=GL_NV_cooperative_matrix_decode_vector ;;'
        echo '  */feature-tests/bfloat16.comp) ext=GL_EXT_bfloat16 ;;'
        echo '  */feature-tests/float_e2m1.comp) ext=GL_EXT_float_e2m1 ;;'
        echo '  */feature-tests/float_e4m3.comp) ext=GL_EXT_float_e4m3 ;;'
        echo 'esac; done'
        echo '[ -n "$ext" ] && { echo "error: extension not supported: $ext (a lavapipe-only build)" >&2; exit 1; }'
        echo "exec \"$glslc\" \"\$@\""
      } >"$lean"
      chmod +x "$lean"
      glslc=$lean
    fi
    [[ -n $glslc ]] && common+=("-DVulkan_GLSLC_EXECUTABLE=$glslc") ;;
  rocm)
    [[ -n $TARGETS ]] || { echo "build.sh: rocm needs TARGETS (gfx targets, e.g. 'gfx1151')" >&2; exit 2; }
    # ROCm's own clang compiles the HIP kernels (hipconfig -l: its bin folder).
    rocm_bin=$(hipconfig -l 2>/dev/null || echo /opt/rocm/llvm/bin)
    common+=(-DGGML_HIP=ON "-DGPU_TARGETS=$TARGETS" "-DAMDGPU_TARGETS=$TARGETS"
      "-DCMAKE_C_COMPILER=$rocm_bin/clang" "-DCMAKE_CXX_COMPILER=$rocm_bin/clang++") ;;
  *) echo "build.sh: unknown backend '$BACKEND' (cpu, cuda, vulkan, rocm)" >&2; exit 2 ;;
esac
# The engines' own names for the same switches (stable-diffusion.cpp wraps ggml's).
sd_backend() {
  case $BACKEND in cuda) echo -DSD_CUDA=ON ;; vulkan) echo -DSD_VULKAN=ON ;; rocm) echo -DSD_HIPBLAS=ON ;; *) echo -DSD_CUDA=OFF ;; esac
}
# A static executable only where nothing is loaded at run time: the GPU runtimes are shared libraries.
static=()
[[ $BACKEND == cpu ]] && static=(-DCMAKE_EXE_LINKER_FLAGS=-static)

case $ENGINE in
  llama)
    flags=("${common[@]}" -DLLAMA_CURL=OFF -DLLAMA_OPENSSL=OFF -DLLAMA_BUILD_TESTS=OFF -DLLAMA_BUILD_EXAMPLES=OFF
      -DLLAMA_USE_PREBUILT_UI=OFF -DLLAMA_BUILD_UI=OFF "-DCMAKE_PROJECT_INCLUDE=$HERE/llama-build.cmake")
    targets=(llama-server llama-fit-params) ;;
  sd)
    flags=("${common[@]}" "$(sd_backend)" -DSD_SERVER_BUILD_FRONTEND=OFF -DSD_WEBP=OFF -DSD_WEBM=OFF "${static[@]}")
    targets=(sd-server) ;;
  whisper)
    flags=("${common[@]}" -DWHISPER_BUILD_TESTS=OFF -DWHISPER_BUILD_EXAMPLES=ON -DWHISPER_BUILD_SERVER=ON
      -DWHISPER_SDL2=OFF -DWHISPER_CURL=OFF "${static[@]}")
    targets=(whisper-server) ;;
  *) echo "build.sh: unknown engine '$ENGINE' (llama, sd, whisper)" >&2; exit 2 ;;
esac
# stable-diffusion.cpp forwards GGML_* to its ggml; the llama.cpp flags above are ggml's own.
[[ $ENGINE == sd && $BACKEND == rocm ]] && flags+=(-DGGML_HIP=ON)

rm -rf "$BUILD_DIR"
cmake -S "$SRC" -B "$BUILD_DIR" "${flags[@]}" >"$BUILD_DIR.log" 2>&1 ||
  { tail -20 "$BUILD_DIR.log" >&2; echo "build.sh: configuring $ENGINE ($BACKEND) failed: $BUILD_DIR.log" >&2; exit 1; }
cmake --build "$BUILD_DIR" -j "$JOBS" --target "${targets[@]}" >>"$BUILD_DIR.log" 2>&1 ||
  { tail -20 "$BUILD_DIR.log" >&2; echo "build.sh: building $ENGINE ($BACKEND) failed: $BUILD_DIR.log" >&2; exit 1; }
mkdir -p "$OUT.tmp"
for t in "${targets[@]}"; do cp "$BUILD_DIR/bin/$t" "$OUT.tmp/"; done
rm -rf "$OUT" && mv "$OUT.tmp" "$OUT"
rm -rf "$BUILD_DIR" "$BUILD_DIR-glslc"
