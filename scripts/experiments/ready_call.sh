#!/usr/bin/env bash
# The open experiment of this folder (README.md), built here and measured in
# one device call, so a session whose ignored folders are gone starts from git.
#   scripts/experiments/ready_call.sh build [NAME ...]  (here: head, claim2; ~8 min each at -j2)
#   scripts/experiments/ready_call.sh device-claim OUT  (device, ~2 min; carry .carry/variants/{head,claim2})
# Table back here: tar xzf OUT/claim_ab.tgz; python3 bench/ab_library_table.py ab head claim2.
set -uo pipefail
here=$(cd "$(dirname "$0")/../.." && pwd)
cd "$here"
v=.carry/variants
plain64_128="Forward:BF16:64:Plain;Forward:BF16:128:Plain;Backward:BF16:64:Plain;Backward:BF16:128:Plain"
case ${1:-} in
  build)
    set -e
    shift
    # head: the A side, the same kernel rows as the variant.
    [ $# -gt 0 ] || set -- head claim2
    for name in "$@"; do
      case $name in
        head) scripts/build_variant.sh head --bench-only --library --kernels "$plain64_128" ;;
        claim2) scripts/build_variant.sh claim2 --library --kernels "$plain64_128" \
                  scripts/experiments/varlen_claim_during_chain.patch ;;
        *) echo "ready_call.sh build: no variant '$name'" >&2; exit 2 ;;
      esac
    done
    du -sh $v/* ;;
  device-claim)
    out=${2:?usage: ready_call.sh device-claim OUT}
    mkdir -p "$out"
    # claim2's backward and varlen suites under a watchdog, then issue 17's
    # backward rows (varlen / fixed at equal lengths) against head.
    timeout --kill-after=10 300 "$v/claim2/dash_gpu_tests" --gtest_filter='*Backward*:*Varlen*' > "$out/claim2_tests.log" 2>&1
    echo "claim2 tests: exit $? ($(tail -n 3 "$out/claim2_tests.log" | tr '\n' ' '))"
    DASH_AB_LIMIT=150 scripts/ab_library.sh "$out/claim" 2 varlen_vs_fixed \
      "--passes bwd --hdims 64,128 --seqlens 512,2048 --reps 20" \
      head=$v/head/libdash_attn_capi.so claim2=$v/claim2/libdash_attn_capi.so
    tar czf "$out/claim_ab.tgz" -C "$out/claim" ab && rm -rf "$out/claim" ;;
  *) echo "usage: ready_call.sh build [NAME ...] | device-claim OUT" >&2; exit 2 ;;
esac
