#!/usr/bin/env bash
# The open experiments of this folder (README.md), built here and measured in
# one device call, so a session whose ignored folders are gone starts from git.
#   scripts/experiments/ready_call.sh build [land] [claim]  (here, -j2, ~15-25 min each)
#     land:  HEAD + the scan cache + the flag in the order kernel
#     claim: land's patches + the claim during the chain
#     each every kernel row, packed (xz, ~5 MB) into .carry/variants/NAME
#   scripts/experiments/ready_call.sh device OUT  (device, ~8 min; carry
#     .carry/variants/land and .carry/variants/claim)
#     the patches change only varlen code (the claim scan, the order kernel, the
#     varlen producer), so each variant runs the varlen GPU tests; land also
#     the whole Python suite, claim its varlen tests; then issue 17's backward
#     rows, land against claim (bench/varlen_vs_fixed.py, 2 rounds).
# Table back here: tar xzf OUT/claim_ab.tgz; python3 bench/ab_library_table.py ab land claim.
set -uo pipefail
here=$(cd "$(dirname "$0")/../.." && pwd)
cd "$here"
x=scripts/experiments
land_patches=("$x/varlen_scan_window_cache.patch" "$x/bwd_unordered_flag_in_order_kernel.patch")
claim_patches=("${land_patches[@]}" "$x/varlen_claim_during_chain.patch")
case ${1:-} in
  build)
    set -e
    shift
    [ $# -gt 0 ] || set -- land claim
    for name in "$@"; do
      case $name in
        land) scripts/build_variant.sh land --packed "${land_patches[@]}" ;;
        claim) scripts/build_variant.sh claim --packed "${claim_patches[@]}" ;;
        *) echo "ready_call.sh build: no variant '$name'" >&2; exit 2 ;;
      esac
    done ;;
  device)
    out=${2:?usage: ready_call.sh device OUT}
    commit="$(git rev-parse --short HEAD 2>/dev/null || echo HEAD)"
    DASH_COMMIT="$commit+land" DASH_STEPS="tests python" DASH_TEST_FILTER='*Varlen*' \
      DASH_TEST_LIMIT=200 DASH_PYTHON_LIMIT=150 scripts/gpu_run.sh "$out/land" .carry/variants/land
    claim=.carry/variants/claim
    tar -C $claim -xJf $claim/binaries.tar.xz || exit 1
    timeout --kill-after=10 200 $claim/tests/dash_gpu_tests --gtest_filter='*Varlen*' > "$out/claim_tests.log" 2>&1
    echo "claim varlen GPU tests: exit $? ($(tail -n 3 "$out/claim_tests.log" | tr '\n' ' '))"
    DASH_ATTN_LIBRARY=$here/$claim/src/libdash_attn_capi.so PYTHONPATH=$here/python \
      timeout --kill-after=10 100 python3 -m pytest -q -rs -k varlen tests/python > "$out/claim_python.log" 2>&1
    echo "claim varlen Python tests: exit $? ($(tail -n 1 "$out/claim_python.log"))"
    DASH_AB_LIMIT=150 scripts/ab_library.sh "$out/claim" 2 varlen_vs_fixed \
      "--passes bwd --hdims 64,128 --seqlens 512,2048 --reps 20" \
      land=.carry/variants/land/src/libdash_attn_capi.so claim=$claim/src/libdash_attn_capi.so
    tar czf "$out/claim_ab.tgz" -C "$out/claim" ab && rm -rf "$out/claim" ;;
  *) echo "usage: ready_call.sh build [land] [claim] | device OUT" >&2; exit 2 ;;
esac
