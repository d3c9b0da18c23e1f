#!/usr/bin/env bash
# The open experiments of this folder (README.md), built here and measured in
# device calls, so a session whose ignored folders are gone starts from git.
#   scripts/experiments/ready_call.sh build [land] [claim2]  (here, -j2: land ~25 min, claim2 ~12 min)
#     land:   HEAD + the scan cache + the flag in the order kernel, every kernel
#             row, packed (xz) into .carry/variants/land: the candidate to land
#     claim2: land's patches + the claim during the chain, bf16 hdim 64 / 128
#             Plain, into .carry/variants/claim2
#   scripts/experiments/ready_call.sh device-land OUT   (device, ~8 min; carry .carry/variants/land)
#     the whole GPU suite and the Python suite on land
#   scripts/experiments/ready_call.sh device-claim OUT  (device, ~2 min; carry
#     .carry/variants/{land,claim2}): claim2's suites, then issue 17's backward rows against land
# Table back here: tar xzf OUT/claim_ab.tgz; python3 bench/ab_library_table.py ab land claim2.
set -uo pipefail
here=$(cd "$(dirname "$0")/../.." && pwd)
cd "$here"
x=scripts/experiments
land_patches=("$x/varlen_scan_window_cache.patch" "$x/bwd_unordered_flag_in_order_kernel.patch")
plain64_128="Forward:BF16:64:Plain;Forward:BF16:128:Plain;Backward:BF16:64:Plain;Backward:BF16:128:Plain"
land=.carry/variants/land
land_library=$land/src/libdash_attn_capi.so
unpack_land() { [ -f "$land_library" ] || tar -C $land -xJf $land/binaries.tar.xz; }
case ${1:-} in
  build)
    set -e
    shift
    [ $# -gt 0 ] || set -- land claim2
    for name in "$@"; do
      case $name in
        land) scripts/build_variant.sh land --packed "${land_patches[@]}" ;;
        claim2) scripts/build_variant.sh claim2 --library --kernels "$plain64_128" \
                  "${land_patches[@]}" "$x/varlen_claim_during_chain.patch" ;;
        *) echo "ready_call.sh build: no variant '$name'" >&2; exit 2 ;;
      esac
    done ;;
  device-land)
    out=${2:?usage: ready_call.sh device-land OUT}
    DASH_COMMIT="$(git rev-parse --short HEAD 2>/dev/null || echo HEAD)+land" DASH_STEPS="tests python" \
      DASH_TEST_LIMIT=400 DASH_PYTHON_LIMIT=150 scripts/gpu_run.sh "$out/land" $land ;;
  device-claim)
    out=${2:?usage: ready_call.sh device-claim OUT}
    mkdir -p "$out"
    unpack_land
    timeout --kill-after=10 300 .carry/variants/claim2/dash_gpu_tests --gtest_filter='*Backward*:*Varlen*' \
      > "$out/claim2_tests.log" 2>&1
    echo "claim2 tests: exit $? ($(tail -n 3 "$out/claim2_tests.log" | tr '\n' ' '))"
    DASH_AB_LIMIT=150 scripts/ab_library.sh "$out/claim" 2 varlen_vs_fixed \
      "--passes bwd --hdims 64,128 --seqlens 512,2048 --reps 20" \
      land=$land_library claim2=.carry/variants/claim2/libdash_attn_capi.so
    tar czf "$out/claim_ab.tgz" -C "$out/claim" ab && rm -rf "$out/claim" ;;
  *) echo "usage: ready_call.sh build [land] [claim2] | device-land OUT | device-claim OUT" >&2; exit 2 ;;
esac
