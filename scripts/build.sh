#!/usr/bin/env bash
# Configures and builds the CMake project into ${DASH_BUILD_DIR:-build}.
# The sm_90a kernels are built whenever a CUDA 13 nvcc is found; otherwise the
# host-only part (schedules, model, reference, validation) is built and a
# line says so. DASH_ENABLE_CUDA=ON/OFF overrides that choice, DASH_TARGETS
# (space-separated) builds only those targets, DASH_CMAKE_ARGS passes more
# configure options.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/install_deps.sh
build=${DASH_BUILD_DIR:-build}
if ! command -v nvcc >/dev/null && [ -x /usr/local/cuda/bin/nvcc ]; then export PATH=/usr/local/cuda/bin:$PATH; fi
cuda=${DASH_ENABLE_CUDA:-}
if [ -z "$cuda" ]; then
  cuda=ON
  if ! command -v nvcc >/dev/null; then
    echo "build.sh: nvcc not found; building the host-only part (no kernels)" >&2
    cuda=OFF
  fi
fi
# shellcheck disable=SC2086  # DASH_CMAKE_ARGS is word-split on purpose
cmake -S . -B "$build" -DCMAKE_BUILD_TYPE=Release -DDASH_ENABLE_CUDA="$cuda" ${DASH_CMAKE_ARGS:-}
targets=()
for target in ${DASH_TARGETS:-}; do targets+=(--target "$target"); done
# -j2: a kernel translation unit needs ~6 GB and ~2 minutes of one core.
cmake --build "$build" -j "${DASH_JOBS:-2}" "${targets[@]}"
