#!/usr/bin/env bash
# The open experiments of this folder (README.md), built here and measured in
# device calls, so a session whose ignored folders are gone starts from git.
#   scripts/experiments/ready_call.sh build [NAME ...] (here, ~22 min at -j2 for all four:
#     head rows tallpv vscan2; head + rows first lets device-a run while the rest build)
#   scripts/experiments/ready_call.sh device-a OUT    (device, ~6 min; carry .carry/variants/{head,rows})
#   scripts/experiments/ready_call.sh device-fwd OUT  (device, ~4 min; carry .carry/variants/{head,tallpv})
#   scripts/experiments/ready_call.sh device-b OUT    (device, ~6 min; carry .carry/variants/{head,vscan2,rows})
# Tables back here: python3 bench/ab_table.py DIR head tallpv;
#                   python3 bench/ab_library_table.py DIR head rows (or vscan2).
set -uo pipefail
here=$(cd "$(dirname "$0")/../.." && pwd)
cd "$here"
v=.carry/variants
plain64_128="Forward:BF16:64:Plain;Forward:BF16:128:Plain;Backward:BF16:64:Plain;Backward:BF16:128:Plain"
# A variant's GPU tests under a watchdog: the log as OUT/NAME_tests.log, its tail here.
variant_tests() {  # OUT NAME FILTER SECONDS
  mkdir -p "$1"
  timeout --kill-after=10 "$4" "$v/$2/dash_gpu_tests" --gtest_filter="$3" > "$1/$2_tests.log" 2>&1
  echo "$2 tests: exit $? ($(tail -n 3 "$1/$2_tests.log" | tr '\n' ' '))"
}
case ${1:-} in
  build)
    set -e
    shift
    # head: the A side of every A/B, the same kernel rows as the variants.
    [ $# -gt 0 ] || set -- head rows tallpv vscan2
    for name in "$@"; do
      case $name in
        head) scripts/build_variant.sh head --bench-only --library --kernels "$plain64_128" ;;
        rows) scripts/build_variant.sh rows --library --kernels "$plain64_128" \
                scripts/experiments/bwd_chain_rows.patch ;;
        tallpv) scripts/build_variant.sh tallpv --library --kernels "Forward:BF16:64:Plain" \
                  scripts/experiments/fwd_tall_softmax_under_pv.patch ;;
        vscan2) scripts/build_variant.sh vscan2 --bench-only --library \
                  --kernels "Forward:BF16:128:Plain;Backward:BF16:128:Plain" \
                  scripts/experiments/varlen_scan_window_cache.patch ;;
        *) echo "ready_call.sh build: no variant '$name'" >&2; exit 2 ;;
      esac
    done
    du -sh $v/* ;;
  device-a)
    out=${2:?usage: ready_call.sh device-a OUT}
    # rows: the backward and varlen suites, then issue 17's backward rows
    # (the closest bar, first).
    variant_tests "$out" rows '*Backward*:*Varlen*' 300
    DASH_AB_LIMIT=150 scripts/ab_library.sh "$out/rows" 2 varlen_vs_fixed \
      "--passes bwd --hdims 64,128 --seqlens 512,2048 --reps 20" \
      head=$v/head/libdash_attn_capi.so rows=$v/rows/libdash_attn_capi.so
    tar czf "$out/rows_ab.tgz" -C "$out/rows" ab && rm -rf "$out/rows" ;;
  device-fwd)
    out=${2:?usage: ready_call.sh device-fwd OUT}
    # tallpv: the forward suites (the varlen packing test checks that the two
    # hdim 64 tiles still give a row the same bits), then the hdim 64 forward A/B.
    variant_tests "$out" tallpv '*Forward*:*Varlen*' 240
    DASH_AB_PASSES=fwd scripts/ab_backward.sh "$out/tallpv" "--hdims 64 --masks full,causal" \
      head=$v/head/dash-bench tallpv=$v/tallpv/dash-bench ;;
  device-b)
    out=${2:?usage: ready_call.sh device-b OUT}
    # vscan2: issue 17's rows at hdim 128, both passes, the ragged 8k row included.
    scripts/ab_library.sh "$out/vscan2" 2 varlen_vs_fixed "--hdims 128 --seqlens 512,2048,8192 --reps 20" \
      head=$v/head/libdash_attn_capi.so vscan2=$v/vscan2/libdash_attn_capi.so
    tar czf "$out/vscan2_ab.tgz" -C "$out/vscan2" ab && rm -rf "$out/vscan2"
    # Where issue 17's hdim 64 512 backward rows lose their ~4%: ncu of one
    # deterministic backward, fixed and varlen at equal lengths, HEAD and rows
    # (details + SASS counters as CSV; read them with scripts/ncu_sass_phases.py).
    mkdir -p "$out/ncu"
    for name in head rows; do
      for layout in fixed varlen; do
        report=$out/ncu/${name}_$layout
        DASH_ATTN_LIBRARY=$here/$v/$name/libdash_attn_capi.so PYTHONPATH=$here/python \
          timeout --kill-after=10 120 ncu --clock-control none --profile-from-start off --set full \
          --import-source no -f -o "$report" python3 scripts/ncu_one_call.py --deterministic \
          --pass bwd --hdim 64 --batch 32 --seqlen 512 --heads 32 --heads-kv 8 \
          $([ $layout = varlen ] && echo --varlen) > "$report.log" 2>&1
        echo "ncu $name $layout: exit $?"
        ncu --import "$report.ncu-rep" --page details --csv > "${report}_details.csv" 2>> "$report.log"
        ncu --import "$report.ncu-rep" --page source --csv --print-source sass > "${report}_sass.csv" 2>> "$report.log"
        rm -f "$report.ncu-rep"
      done
    done
    tar czf "$out/ncu.tgz" -C "$out" ncu && rm -rf "$out/ncu" ;;
  *) echo "usage: ready_call.sh build | device-a OUT | device-fwd OUT | device-b OUT" >&2; exit 2 ;;
esac
