#!/usr/bin/env bash
# The main job: on a Hopper GPU, the benchmark table with verification and the
# bitwise determinism check; without one, the schedule model of the DASH paper.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/build.sh
build=${DASH_BUILD_DIR:-build}
if command -v nvidia-smi >/dev/null && nvidia-smi --query-gpu=compute_cap --format=csv,noheader 2>/dev/null | grep -q '^9\.0'; then
  out=${1:-results/$(date +%Y%m%d-%H%M%S)}
  exec scripts/gpu_run.sh "$out" "$build"
fi
echo "run.sh: no Hopper (sm_90) GPU here; running the schedule model instead."
"$build/apps/dash-model" --paper 8 2
"$build/apps/dash-model" --paper 8 2 --causal
