#!/usr/bin/env bash
# The next device calls, ready to run (scripts/experiments/README.md), each
# under the 600 s a call may run, its logs tarred into one file of $OUT (a
# call returns at most 8 files) and its pass / fail lines on stdout.
#   scripts/experiments/ready_call.sh build [head] [runcache]  (here, -j2)
#     head:     HEAD, every kernel row, packed (xz, ~5 MB; ~25 min)
#     runcache: HEAD + varlen_claim_run_cache.patch, bf16 hdim 64 / 128, tests,
#               bench and library (~12 min)
#   scripts/experiments/ready_call.sh suite OUT     (device, ~500 s; carry .carry/variants/head)
#     the whole GPU suite and the Python suite on head
#   scripts/experiments/ready_call.sh runcache OUT  (device, ~500 s; carry
#     .carry/variants/head and .carry/variants/runcache): runcache's varlen GPU
#     tests, then issue 17's backward rows, head against runcache (2 rounds)
# The A/B's table is on the call's stdout (again here: tar xzf OUT/runcache.tgz;
# python3 bench/ab_library_table.py ab head runcache).
set -uo pipefail
here=$(cd "$(dirname "$0")/../.." && pwd)
cd "$here"
head=.carry/variants/head
runcache=.carry/variants/runcache
unpack_head() { [ -f $head/src/libdash_attn_capi.so ] || tar -C $head -xJf $head/binaries.tar.xz; }
case ${1:-} in
  build)
    set -e
    shift
    [ $# -gt 0 ] || set -- head runcache
    for name in "$@"; do
      case $name in
        head) scripts/build_variant.sh head --packed ;;
        runcache) scripts/build_variant.sh runcache --library \
                    --kernels "Forward:BF16:64;Forward:BF16:128;Backward:BF16:64;Backward:BF16:128" \
                    scripts/experiments/varlen_claim_run_cache.patch ;;
        *) echo "ready_call.sh build: no variant '$name'" >&2; exit 2 ;;
      esac
    done ;;
  suite)
    out=${2:?usage: ready_call.sh suite OUT}
    DASH_COMMIT="$(git rev-parse --short HEAD 2>/dev/null || echo HEAD)" DASH_STEPS="tests python" \
      DASH_TEST_LIMIT=400 DASH_PYTHON_LIMIT=150 scripts/gpu_run.sh "$out/suite" $head > "$out/suite.txt" 2>&1
    echo "suite: exit $?"
    grep -h -E '^\[  (PASSED|FAILED) |^!!|passed|failed' "$out/suite.txt" | head -40
    tar czf "$out/suite.tgz" -C "$out" suite && rm -rf "$out/suite" ;;
  runcache)
    out=${2:?usage: ready_call.sh runcache OUT}
    mkdir -p "$out/runcache"
    unpack_head
    timeout --kill-after=10 200 $runcache/dash_gpu_tests --gtest_filter='*Varlen*' > "$out/runcache/tests.log" 2>&1
    echo "runcache varlen GPU tests: exit $?"
    grep -E '^\[  (PASSED|FAILED) ' "$out/runcache/tests.log"
    DASH_AB_LIMIT=70 scripts/ab_library.sh "$out/runcache" 2 varlen_vs_fixed \
      "--passes bwd --hdims 64,128 --seqlens 512,2048 --reps 20" \
      head=$head/src/libdash_attn_capi.so runcache=$runcache/libdash_attn_capi.so
    python3 bench/ab_library_table.py "$out/runcache/ab" head runcache
    tar czf "$out/runcache.tgz" -C "$out/runcache" . && rm -rf "$out/runcache" ;;
  *) echo "usage: ready_call.sh build [head] [runcache] | suite OUT | runcache OUT" >&2; exit 2 ;;
esac
