#!/usr/bin/env bash
# Everything that needs the GPU, in one invocation, from an existing build
# (made on any machine, e.g. one without a GPU): all GPU tests under a
# watchdog, the benchmark table with verification and determinism checks, and,
# when torch is importable, the Python package's tests, the peer benchmark
# (bench/peers.py) and the end-to-end block benchmark (bench/e2e_block.py),
# compute-sanitizer on the tests DASH_SANITIZE_FILTER selects. Logs and results go to $1.
#   scripts/gpu_run.sh OUT_DIR [BUILD_DIR]   (BUILD_DIR: a build tree or a folder with
#   the same layout holding tests/dash_gpu_tests, apps/dash-bench, src/libdash_attn_capi.so)
set -uo pipefail
out=${1:?usage: gpu_run.sh OUT_DIR [BUILD_DIR]}
build=${2:-build}
here=$(cd "$(dirname "$0")/.." && pwd)
mkdir -p "$out"
# A compressed carry (DASH_PACK_XZ=1 scripts/pack_for_device.sh) unpacks into its own layout.
if [ -f "$build/binaries.tar.xz" ]; then tar -C "$build" -xJf "$build/binaries.tar.xz" || exit 1; fi
# The device gets a copy of the working tree without .git: pass DASH_COMMIT there.
commit=${DASH_COMMIT:-$(git -C "$here" rev-parse --short HEAD 2>/dev/null || echo unknown)}
status=0
step() {  # step NAME SECONDS COMMAND...: a watchdog bounds every step
  local name=$1 limit=$2
  shift 2
  echo "== $name (limit ${limit}s)"
  timeout --kill-after=10 "$limit" "$@" >"$out/$name.log" 2>&1
  local rc=$?
  tail -n 25 "$out/$name.log"
  [ $rc -eq 0 ] || { echo "!! $name failed with exit code $rc"; status=1; }
}
{
  echo "commit: $commit"
  nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm,power.limit --format=csv 2>/dev/null
  date -u
} | tee "$out/device.txt"
# DASH_STEPS selects steps, so the work can be split over calls that each fit a time limit.
steps=" ${DASH_STEPS:-tests sanitizer python bench peers e2e} "
wanted() { [[ "$steps" == *" $1 "* ]]; }
# The Python steps load this build's C ABI library through the package in the tree.
# An exported PYTHONPATH (e.g. the peers' site from .peers/install.sh) is kept after it.
package_env=(env PYTHONPATH="$here/python${PYTHONPATH:+:$PYTHONPATH}"
             DASH_ATTN_LIBRARY="$(cd "$build" && pwd)/src/libdash_attn_capi.so")
if wanted tests; then
  step gpu_tests "${DASH_TEST_LIMIT:-900}" "$build/tests/dash_gpu_tests" --gtest_filter="${DASH_TEST_FILTER:-*}"
fi
if wanted bench && [ -x "$build/apps/dash-bench" ]; then
  step bench "${DASH_BENCH_LIMIT:-900}" "$build/apps/dash-bench" --grid "${DASH_BENCH_GRID:-standard}" \
    --determinism-runs "${DASH_BENCH_RERUNS:-10}" --verify-max-seqlen "${DASH_BENCH_VERIFY_MAX:-2048}" --commit "$commit" --json "$out/bench.json" \
    ${DASH_BENCH_ARGS:-}
fi
if wanted sanitizer && [ -n "${DASH_SANITIZE_FILTER:-}" ]; then
  step sanitizer "${DASH_SANITIZE_LIMIT:-600}" bash -c 'for tool in memcheck racecheck; do
      compute-sanitizer --tool $tool --error-exitcode 1 "$0" --gtest_filter="$1" || exit 1; done' \
    "$build/tests/dash_gpu_tests" "$DASH_SANITIZE_FILTER"
fi
if wanted python && python3 -c 'import torch' 2>/dev/null; then
  step python_tests "${DASH_PYTHON_LIMIT:-600}" "${package_env[@]}" python3 -m pytest -q -rs "$here/tests/python"
fi
# DASH_BENCH_ARGS passes more dash-bench options (e.g. --hdims 256).
# Peers and the end-to-end block run dash_attn through the same package.
# DASH_PEERS_ARGS / DASH_E2E_ARGS pass more
# options (e.g. --quick, --impls ...); the JSON is rewritten after every
# shape, so a watchdog stop keeps what was measured.
if wanted peers && python3 -c 'import torch' 2>/dev/null; then
  step peers "${DASH_PEERS_LIMIT:-540}" "${package_env[@]}" \
    python3 "$here/bench/peers.py" --json "$out/peers.json" --csv "$out/peers.csv" \
    --latest-json "$out/latest_peers.json" --commit "$commit" ${DASH_PEERS_ARGS:-}
fi
if wanted e2e && python3 -c 'import torch' 2>/dev/null; then
  step e2e "${DASH_E2E_LIMIT:-240}" "${package_env[@]}" \
    python3 "$here/bench/e2e_block.py" --json "$out/e2e.json" --commit "$commit" ${DASH_E2E_ARGS:-}
fi
exit $status
