#!/usr/bin/env bash
# The main job: on a Hopper GPU, the benchmark table with verification and the
# bitwise determinism check; without one, the schedule model of the DASH paper.
# Whether there is a usable sm_90 GPU is decided before building: without one
# only the host part (DASH_ENABLE_CUDA=OFF, no kernels, a few minutes on 2
# cores) is built, into ${DASH_HOST_BUILD_DIR:-build-host}. DASH_GPU=1 or 0
# overrides the nvidia-smi check.
set -euo pipefail
cd "$(dirname "$0")/.."
gpu=${DASH_GPU:-}
why="DASH_GPU=$gpu"
if [ -z "$gpu" ]; then
  caps=$(nvidia-smi --query-gpu=compute_cap --format=csv,noheader 2>/dev/null || true)
  if grep -q '^9\.0' <<<"$caps"; then
    gpu=1 why="nvidia-smi reports compute capability 9.0"
  elif [ -n "$caps" ]; then
    gpu=0 why="nvidia-smi reports compute capability $(tr '\n' ' ' <<<"$caps")and no 9.0"
  elif command -v nvidia-smi >/dev/null; then
    gpu=0 why="nvidia-smi finds no GPU"
  else
    gpu=0 why="nvidia-smi not found"
  fi
fi
if [ "$gpu" = 1 ]; then
  build=${DASH_BUILD_DIR:-build}
  echo "run.sh: sm_90 GPU ($why): building everything into $build, then the benchmark and determinism runs"
  scripts/build.sh
  out=${1:-results/$(date +%Y%m%d-%H%M%S)}
  exec scripts/gpu_run.sh "$out" "$build"
fi
build=${DASH_HOST_BUILD_DIR:-build-host}
echo "run.sh: no sm_90 GPU ($why): building only the host part (DASH_ENABLE_CUDA=OFF, no kernels) into $build and running the schedule model"
DASH_BUILD_DIR=$build DASH_ENABLE_CUDA=OFF DASH_TARGETS=dash-model \
  DASH_CMAKE_ARGS="-DDASH_BUILD_TESTS=OFF ${DASH_CMAKE_ARGS:-}" scripts/build.sh
"$build/apps/dash-model" --paper 8 2
"$build/apps/dash-model" --paper 8 2 --causal
