#!/usr/bin/env bash
# The next device calls, ready to run (scripts/experiments/README.md), each
# under the 600 s a call may run, its logs tarred into one file of $OUT (a
# call returns at most 8 files) and its pass / fail lines on stdout.
#   scripts/experiments/ready_call.sh build           (here, -j2, ~25 min)
#     HEAD, every kernel row, packed (xz, ~5 MB) into .carry/variants/head
#   scripts/experiments/ready_call.sh suite OUT     (device, ~500 s; carry .carry/variants/head)
#     the whole GPU suite and the Python suite on head
#   scripts/experiments/ready_call.sh varlen OUT    (device, ~400 s; carry .carry/variants/head)
#     head's varlen GPU and Python tests, then issue 17's equal-length table
#     (bench/varlen_vs_fixed.py, every row, 2 rounds; the tables on stdout)
#   scripts/experiments/ready_call.sh build-il256   (here, ~12 min): HEAD +
#     bwd_claim_interleave_env.patch, bf16 hdim 256, dash-bench only, into .carry/variants/il256
#   scripts/experiments/ready_call.sh build-narrow  (here, ~25 min): HEAD + bwd_claim_interleave_narrow_tiles.patch,
#     every kernel row, packed into .carry/variants/narrow
#   DASH_VARIANT=narrow scripts/experiments/ready_call.sh suite OUT   (device, ~430 s; carry .carry/variants/narrow;
#     DASH_SUITE_STEPS="tests" or "python" runs one of the two)
#     the whole GPU and Python suites on that build
#   scripts/experiments/ready_call.sh narrow-ab OUT (device, ~150 s; carry .carry/variants/head and
#     .carry/variants/narrow): hdim 256 backward rows (MHA, GQA 32/8, GQA 16/8), head and narrow alternated
#   scripts/experiments/ready_call.sh walk1 OUT     (device, ~110 s; carry .carry/variants/il256):
#     walked GQA full hdim 256 rows with 1 against 2 interleaved heads (the follow-up of narrow)
#   scripts/experiments/ready_call.sh first OUT     (device, ~470 s; carry head, narrow2, il64):
#     narrow2's GPU tests and A/B against head, then il64 (the forty-first session's unrun call)
#   scripts/experiments/ready_call.sh il64 OUT      (device, ~180 s; carry .carry/variants/il64 =
#     HEAD + bwd_claim_interleave_env.patch, bf16 hdim 64): hdim 64 MHA backward 4k-16k, interleave 1-8
#   scripts/experiments/ready_call.sh vwarp OUT     (device, ~300 s; carry head, vwarp): the varlen
#     forward's warp-wide producer, its forward tests and varlen / fixed forward against head
#   scripts/experiments/ready_call.sh hdim256 OUT   (device, ~450 s; carry .carry/variants/head
#     and .carry/variants/il256): why the hdim 256 GQA 32/8 det. backward falls with length
#     (docs/perf_log.md, thirty-ninth session): schedules and q-heads per chain on head,
#     then the claim interleave 1 / 2 / 4 against head's 8, then ncu's DRAM bytes and
#     L2 hit rate of the backward (2k, 8k); ncu's whole set and SASS counters of the
#     forward at 8 x 2k, fixed and varlen (issue 17's last row), and that row in 3 rounds
set -uo pipefail
here=$(cd "$(dirname "$0")/../.." && pwd)
cd "$here"
head=.carry/variants/${DASH_VARIANT:-head}  # DASH_VARIANT: another packed build for suite / varlen
# unpack DIR: a packed build's binaries (scripts/pack_for_device.sh), once.
unpack() { [ -f "$1/src/libdash_attn_capi.so" ] || tar -C "$1" -xJf "$1/binaries.tar.xz"; }
# with_head_library COMMAND...: COMMAND against head's C ABI library and this checkout's package.
with_head_library() {
  DASH_ATTN_LIBRARY=$PWD/$head/src/libdash_attn_capi.so PYTHONPATH="$here/python${PYTHONPATH:+:$PYTHONPATH}" "$@"
}
# bench_rows BASE BINARY [ARGS...]: one timed dash-bench run (backward, 10 reps, 2 determinism
# runs, settled, no fp64 check) into BASE.json / BASE.log, its rows on stdout. The
# environment passes through (DASH_EXP_INTERLEAVE for the override builds).
bench_rows() {
  local base=$1 binary=$2
  shift 2
  timeout --kill-after=10 70 "$binary" --passes bwd --reps 10 --determinism-runs 2 --verify-max-seqlen 0 \
    --settle-ms 200 --commit "$commit" --json "$base.json" "$@" > "$base.log" 2>&1
  echo "$(basename "$base"): exit $?"
  grep -E ' bwd ' "$base.log" | grep -v repro | sed -E 's/ +/ /g'
}
commit=${DASH_COMMIT:-$(git rev-parse --short HEAD 2>/dev/null || echo unknown)}  # the device has no .git: pass DASH_COMMIT
case ${1:-} in
  build) scripts/build_variant.sh head --packed ;;
  build-il256) scripts/build_variant.sh il256 --bench-only --kernels "Forward:BF16:256;Backward:BF16:256" \
                 scripts/experiments/bwd_claim_interleave_env.patch ;;
  build-narrow) scripts/build_variant.sh narrow --packed scripts/experiments/bwd_claim_interleave_narrow_tiles.patch ;;
  narrow-ab)  # hdim 256 backward rows, head against the narrow-tile claim interleave, 2 rounds (~70 s a build)
    # DASH_AB_BUILDS: the variants, packed (apps/dash-bench) or bench builds (dash-bench); default "head narrow"
    out=${2:?usage: ready_call.sh narrow-ab OUT}
    mkdir -p "$out/narrow"
    builds=${DASH_AB_BUILDS:-head narrow}
    for build in $builds; do [ -f .carry/variants/$build/binaries.tar.xz ] && unpack .carry/variants/$build; done
    for round in $(seq 1 "${DASH_AB_ROUNDS:-2}"); do
      for build in $builds; do
        binary=.carry/variants/$build/apps/dash-bench
        [ -x "$binary" ] || binary=.carry/variants/$build/dash-bench
        bench_rows "$out/narrow/${build}_r$round" $binary --shape 4,4096,4096,8,8,256 --shape 8,2048,2048,32,8,256 \
          --shape 2,8192,8192,32,8,256 --shape 4,4096,4096,16,8,256 --masks full,causal --schedules atomic,auto
      done
    done
    tar czf "$out/narrow.tgz" -C "$out/narrow" . && rm -rf "$out/narrow" ;;
  walk1)  # walked GQA full rows at hdim 256: 1 against 2 interleaved heads (il256's override), 2 rounds (~110 s)
    out=${2:?usage: ready_call.sh walk1 OUT}
    mkdir -p "$out/walk1"
    for round in 1 2; do
      for interleave in 1 2; do
        DASH_EXP_INTERLEAVE=$interleave bench_rows "$out/walk1/il${interleave}_r$round" .carry/variants/il256/dash-bench \
          --shape 8,2048,2048,32,8,256 --shape 4,4096,4096,32,8,256 --shape 2,8192,8192,32,8,256 \
          --shape 1,16384,16384,32,8,256 --shape 4,4096,4096,16,8,256 --shape 4,4096,4096,32,1,256 --masks full \
          --schedules atomic,auto
      done
    done
    tar czf "$out/walk1.tgz" -C "$out/walk1" . && rm -rf "$out/walk1" ;;
  first)  # the forty-first session's unrun call, in order of value (~470 s; carry .carry/variants/head,
    # .carry/variants/narrow2 and .carry/variants/il64): narrow2's GPU tests (hdim 256 rows), its A/B
    # against head (2 rounds), then the hdim 64 interleave sweep (cut first if time runs out)
    out=${2:?usage: ready_call.sh first OUT}
    timeout --kill-after=10 150 .carry/variants/narrow2/dash_gpu_tests > "$out/narrow2_tests.log" 2>&1
    echo "narrow2 GPU tests: exit $?"
    grep -E '^\[  FAILED|^\[  PASSED|tests ran' "$out/narrow2_tests.log" | tail -8
    DASH_AB_BUILDS="head narrow2" bash "$here/scripts/experiments/ready_call.sh" narrow-ab "$out"
    bash "$here/scripts/experiments/ready_call.sh" il64 "$out" ;;
  il64)  # hdim 64 MHA det. / atomic backward at 4k-16k (issue 16's gap) against the claim interleave
    # 1 / 2 / 4 / 8 (8 = HEAD) through il64's override, one round, then ncu's DRAM bytes and L2
    # hit rate at 1 x 16k full with 8 and 2 heads (~180 s; carry .carry/variants/il64)
    out=${2:?usage: ready_call.sh il64 OUT}
    mkdir -p "$out/il64"
    for interleave in 8 2 1 4; do
      DASH_EXP_INTERLEAVE=$interleave bench_rows "$out/il64/il$interleave" .carry/variants/il64/dash-bench \
        --shape 4,4096,4096,32,32,64 --shape 2,8192,8192,32,32,64 --shape 1,16384,16384,32,32,64 --masks full,causal \
        --schedules atomic,auto
    done
    for interleave in 8 2; do
      DASH_EXP_INTERLEAVE=$interleave timeout --kill-after=10 60 ncu --clock-control none -k regex:bwd_main -c 1 \
        --metrics gpu__time_duration.sum,dram__bytes_read.sum,dram__bytes_write.sum,lts__t_sector_hit_rate.pct --csv \
        .carry/variants/il64/dash-bench --passes bwd --shape 1,16384,16384,32,32,64 --masks full --schedules auto \
        --reps 1 --determinism-runs 1 --verify-max-seqlen 0 > "$out/il64/ncu_il$interleave.csv" 2>&1
      echo "ncu interleave $interleave: exit $?"
      grep bwd_main "$out/il64/ncu_il$interleave.csv" | awk -F'","' '{print $(NF-2), $(NF-1), $NF}' | head -8
    done
    tar czf "$out/il64.tgz" -C "$out/il64" . && rm -rf "$out/il64" ;;
  hdim256)
    out=${2:?usage: ready_call.sh hdim256 OUT}
    mkdir -p "$out/hdim256"
    unpack $head
    shapes=(--shape 8,2048,2048,32,8,256 --shape 2,8192,8192,32,8,256 --shape 4,4096,4096,8,8,256)
    bench() {  # bench NAME BINARY [ARGS...]: bench_rows over this step's shapes
      local name=$1 binary=$2
      shift 2
      bench_rows "$out/hdim256/$name" "$binary" "${shapes[@]}" "$@"
    }
    parts=" ${DASH_HDIM256_PARTS:-bwd fwd} "  # "fwd": issue 17's forward row alone (~200 s)
    if [[ "$parts" == *" bwd "* ]]; then
      bench schedules $head/apps/dash-bench --masks full,causal --schedules atomic,descending,auto
      bench walk1 $head/apps/dash-bench --masks full --schedules auto --q-heads-per-chain 1
      for interleave in 1 2 4; do
        DASH_EXP_INTERLEAVE=$interleave bench interleave$interleave .carry/variants/il256/dash-bench \
          --masks full --schedules auto
      done
      # Memory or not: duration, DRAM bytes and L2 hit rate of each kernel of one call
      # (the backward at 2k / 8k; issue 17's forward row fixed against varlen).
      metrics=gpu__time_duration.sum,dram__bytes_read.sum,dram__bytes_write.sum,lts__t_sector_hit_rate.pct
      profile() {  # profile NAME ARGS...: ncu over one dash_attn call of scripts/ncu_one_call.py
        local name=$1
        shift
        with_head_library timeout --kill-after=10 60 ncu --clock-control none --profile-from-start off --metrics $metrics --csv \
          python3 scripts/ncu_one_call.py --deterministic --hdim 256 --heads 32 --heads-kv 8 "$@" \
          > "$out/hdim256/ncu_$name.csv" 2> "$out/hdim256/ncu_$name.err"
        echo "ncu $name: exit $?"
        python3 -c 'import csv, sys
for r in csv.DictReader(l for l in open(sys.argv[1]) if l.startswith("\"")):
    n = r["Kernel Name"]
    print(n.split("<")[0].split("::")[-1][:28], r["Metric Name"], r["Metric Unit"], r["Metric Value"])' "$out/hdim256/ncu_$name.csv"
      }
      profile bwd_2k --pass bwd --batch 8 --seqlen 2048
      profile bwd_8k --pass bwd --batch 2 --seqlen 8192
    fi
    # Issue 17's last row (varlen / fixed 0.967-0.970): the whole set and the per-instruction
    # counters of both forwards, for scripts/ncu_sass_phases.py and the tile transition.
    profile_full() {  # profile_full NAME ARGS...: ncu --set full over one call, details + SASS CSVs
      local name=$1
      shift
      with_head_library timeout --kill-after=10 90 ncu --clock-control none --profile-from-start off --set full --import-source no \
        -f -o "$out/hdim256/$name" python3 scripts/ncu_one_call.py --hdim 256 --heads 32 --heads-kv 8 "$@" \
        > "$out/hdim256/ncu_$name.err" 2>&1
      echo "ncu full $name: exit $?"
      ncu --import "$out/hdim256/$name.ncu-rep" --page details --csv > "$out/hdim256/ncu_${name}_details.csv"
      ncu --import "$out/hdim256/$name.ncu-rep" --page source --csv --print-source sass > "$out/hdim256/ncu_${name}_sass.csv"
      rm -f "$out/hdim256/$name.ncu-rep"
      grep -E '"(Duration|Elapsed Cycles|Executed Instructions|DRAM Throughput|L2 Hit Rate)"' \
        "$out/hdim256/ncu_${name}_details.csv" | grep fwd_kernel | awk -F'","' '{print $(NF-2), $(NF-1), $NF}'
    }
    if [[ "$parts" == *" fwd "* ]]; then
      profile_full fwd_2k_fixed --pass fwd --batch 8 --seqlen 2048
      profile_full fwd_2k_varlen --pass fwd --batch 8 --seqlen 2048 --varlen
      # The row itself again, three rounds (forward only, hdim 256; ~30 s a round).
      for round in 1 2 3; do
        with_head_library timeout --kill-after=10 60 python3 bench/varlen_vs_fixed.py --passes fwd --hdims 256 --reps 20 \
          --commit "$commit" --json "$out/hdim256/varlen_fwd_r$round.json" 2>&1 | grep 'varlen/fixed' | sed -E 's/ +/ /g'
      done
    fi
    tar czf "$out/hdim256.tgz" -C "$out/hdim256" . && rm -rf "$out/hdim256" ;;
  suite)
    out=${2:?usage: ready_call.sh suite OUT}
    DASH_COMMIT=$commit DASH_STEPS="${DASH_SUITE_STEPS:-tests python}" DASH_TEST_LIMIT=400 DASH_PYTHON_LIMIT=180 \
      scripts/gpu_run.sh "$out/suite" $head > "$out/suite.txt" 2>&1
    echo "suite: exit $?"
    grep -h -E '^\[  (PASSED|FAILED) |^!!|passed|failed' "$out/suite.txt" | head -40
    tar czf "$out/suite.tgz" -C "$out" suite && rm -rf "$out/suite" ;;
  varlen)  # DASH_VARLEN_STEPS picks from "tests python table" (default all three)
    out=${2:?usage: ready_call.sh varlen OUT}
    steps=" ${DASH_VARLEN_STEPS:-tests python table} "
    mkdir -p "$out/varlen"
    unpack $head
    if [[ $steps == *" tests "* ]]; then
      timeout --kill-after=10 200 $head/tests/dash_gpu_tests --gtest_filter='*Varlen*' > "$out/varlen/gpu_tests.log" 2>&1
      echo "varlen GPU tests: exit $?"
      grep -E '^\[  (PASSED|FAILED) ' "$out/varlen/gpu_tests.log"
    fi
    if [[ $steps == *" python "* ]]; then
      with_head_library timeout --kill-after=10 120 \
        python3 -m pytest -q -rs tests/python -k varlen > "$out/varlen/python_tests.log" 2>&1
      echo "varlen Python tests: exit $?"
      tail -n 2 "$out/varlen/python_tests.log"
    fi
    if [[ $steps == *" table "* ]]; then
      for round in $(seq 1 "${DASH_VARLEN_ROUNDS:-2}"); do  # each round's table on stdout as it ends
        DASH_AB_LIMIT=170 scripts/ab_library.sh "$out/varlen/r$round" 1 varlen_vs_fixed "--reps 20 --commit $commit" head=$head/src/libdash_attn_capi.so
        grep 'varlen/fixed' "$out/varlen/r$round/ab/varlen_vs_fixed_head.1.log" | sed -E 's/ +/ /g; s/seqlen //; s/ TFLOPS//'
      done
    fi
    tar czf "$out/varlen.tgz" -C "$out/varlen" . && rm -rf "$out/varlen" ;;
  vwarp)  # the varlen forward's warp-wide producer (issue 17's last row; docs/perf_log.md, forty-second
    # session): its forward GPU tests, then varlen / fixed forward, head against vwarp, 2 rounds (~300 s;
    # carry .carry/variants/head and .carry/variants/vwarp, a --library build of the bf16 forward rows)
    out=${2:?usage: ready_call.sh vwarp OUT}
    mkdir -p "$out/vwarp"
    unpack $head
    timeout --kill-after=10 150 .carry/variants/vwarp/dash_gpu_tests --gtest_filter='*Forward*:*Varlen*:HugeTensors*' \
      > "$out/vwarp/gpu_tests.log" 2>&1
    echo "vwarp GPU tests: exit $?"
    grep -E '^\[  (PASSED|FAILED) |tests ran' "$out/vwarp/gpu_tests.log" | head -12
    DASH_AB_LIMIT=100 scripts/ab_library.sh "$out/vwarp" 2 varlen_vs_fixed "--passes fwd --reps 12 --commit $commit" \
      head=$head/src/libdash_attn_capi.so vwarp=.carry/variants/vwarp/libdash_attn_capi.so
    for log in "$out"/vwarp/ab/*.log; do
      echo "$(basename "$log")"; grep 'varlen/fixed' "$log" | sed -E 's/ +/ /g; s/seqlen //; s/ TFLOPS//'
    done
    tar czf "$out/vwarp.tgz" -C "$out/vwarp" . && rm -rf "$out/vwarp" ;;
  *) echo "usage: ready_call.sh build | build-il256 | build-narrow | suite OUT | varlen OUT | hdim256 OUT | narrow-ab OUT | walk1 OUT | il64 OUT | first OUT | vwarp OUT" >&2
     exit 2 ;;
esac
