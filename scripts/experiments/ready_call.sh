#!/usr/bin/env bash
# The next device calls, ready to run (scripts/experiments/README.md), each
# under the 600 s a call may run, its logs tarred into one file of $OUT (a
# call returns at most 8 files) and its pass / fail lines on stdout. Steps
# that ran their course (narrow-ab, walk1, il64, the hdim 256 backward sweep)
# are in git history (ae0e5e7).
#   scripts/experiments/ready_call.sh build         (here, -j2, ~25 min)
#     HEAD, every kernel row, packed (xz, ~5 MB) into .carry/variants/head
#   scripts/experiments/ready_call.sh build-vwarp   (here, ~15 min beside nothing else)
#     HEAD + fwd_varlen_warp_producer.patch, the bf16 forward rows, with the C ABI library,
#     into .carry/variants/vwarp
#   scripts/experiments/ready_call.sh vwarp OUT     (device, ~300 s; carry head, vwarp): the varlen
#     forward's warp-wide producer, its forward tests and varlen / fixed forward against head
#   scripts/experiments/ready_call.sh peers-stage   (device, seconds; carry .peers/stage1, .peers/install.sh)
#   scripts/experiments/ready_call.sh peers OUT     (device, ~350 s, the next call at once; carry .peers/stage2,
#     .peers/install.sh, .carry/variants/head): every peer row (bench/peers.py --rows all) beside FA4 and cuDNN
#   scripts/experiments/ready_call.sh suite OUT     (device, ~500 s; carry .carry/variants/head)
#     the whole GPU suite and the Python suite on head (DASH_SUITE_STEPS="tests" or "python":
#     one of the two; DASH_VARIANT=NAME: another packed build)
#   scripts/experiments/ready_call.sh varlen OUT    (device, ~400 s; carry .carry/variants/head)
#     head's varlen GPU and Python tests, then issue 17's equal-length table
#     (bench/varlen_vs_fixed.py, every row, 2 rounds; the tables on stdout)
#   scripts/experiments/ready_call.sh fwd256-ncu OUT (device, ~120 s; carry .carry/variants/head)
#     ncu's whole set and SASS counters of the forward at hdim 256 full 8 x 2k, fixed and
#     varlen (issue 17's last row), and that row in 3 rounds; DASH_NCU_LIBRARY: another
#     C ABI library (e.g. .carry/variants/vwarp/libdash_attn_capi.so)
set -uo pipefail
here=$(cd "$(dirname "$0")/../.." && pwd)
cd "$here"
head=.carry/variants/${DASH_VARIANT:-head}  # DASH_VARIANT: another packed build for suite / varlen
# unpack DIR: a packed build's binaries (scripts/pack_for_device.sh), once.
unpack() { [ -f "$1/src/libdash_attn_capi.so" ] || tar -C "$1" -xJf "$1/binaries.tar.xz"; }
# with_library LIBRARY COMMAND...: COMMAND against a C ABI library and this checkout's package.
with_library() {
  local library=$1
  shift
  DASH_ATTN_LIBRARY=$(cd "$(dirname "$library")" && pwd)/$(basename "$library") \
    PYTHONPATH="$here/python${PYTHONPATH:+:$PYTHONPATH}" "$@"
}
commit=${DASH_COMMIT:-$(git rev-parse --short HEAD 2>/dev/null || echo unknown)}  # the device has no .git: pass DASH_COMMIT
case ${1:-} in
  build) scripts/build_variant.sh head --packed ;;
  build-vwarp) scripts/build_variant.sh vwarp --library --kernels "Forward:BF16:64;Forward:BF16:128;Forward:BF16:256" \
                 scripts/experiments/fwd_varlen_warp_producer.patch ;;
  vwarp)  # the varlen forward's warp-wide producer (issue 17's last row; docs/perf_log.md, forty-second
    # session): its forward GPU tests, then varlen / fixed forward, head against vwarp, 2 rounds
    out=${2:?usage: ready_call.sh vwarp OUT}
    mkdir -p "$out/vwarp"
    unpack $head
    timeout --kill-after=10 120 .carry/variants/vwarp/dash_gpu_tests --gtest_filter='*Forward*:*Varlen*:HugeTensors*' \
      > "$out/vwarp/gpu_tests.log" 2>&1
    echo "vwarp GPU tests: exit $?"
    grep -E '^\[  (PASSED|FAILED) |tests ran' "$out/vwarp/gpu_tests.log" | head -12
    DASH_AB_LIMIT=100 scripts/ab_library.sh "$out/vwarp" 2 varlen_vs_fixed "--passes fwd --reps 12 --commit $commit" \
      head=$head/src/libdash_attn_capi.so vwarp=.carry/variants/vwarp/libdash_attn_capi.so
    for log in "$out"/vwarp/ab/*.log; do
      echo "$(basename "$log")"; grep 'varlen/fixed' "$log" | sed -E 's/ +/ /g; s/seqlen //; s/ TFLOPS//'
    done
    tar czf "$out/vwarp.tgz" -C "$out/vwarp" . && rm -rf "$out/vwarp" ;;
  fwd256-ncu)
    out=${2:?usage: ready_call.sh fwd256-ncu OUT}
    mkdir -p "$out/fwd256"
    unpack $head
    library=${DASH_NCU_LIBRARY:-$head/src/libdash_attn_capi.so}
    profile_full() {  # profile_full NAME ARGS...: ncu --set full over one call, details + SASS CSVs
      local name=$1
      shift
      with_library "$library" timeout --kill-after=10 90 ncu --clock-control none --profile-from-start off --set full \
        --import-source no -f -o "$out/fwd256/$name" python3 scripts/ncu_one_call.py --hdim 256 --heads 32 --heads-kv 8 \
        "$@" > "$out/fwd256/ncu_$name.err" 2>&1
      echo "ncu full $name: exit $?"
      ncu --import "$out/fwd256/$name.ncu-rep" --page details --csv > "$out/fwd256/ncu_${name}_details.csv"
      ncu --import "$out/fwd256/$name.ncu-rep" --page source --csv --print-source sass > "$out/fwd256/ncu_${name}_sass.csv"
      rm -f "$out/fwd256/$name.ncu-rep"
      grep -E '"(Duration|Elapsed Cycles|Executed Instructions|DRAM Throughput|L2 Hit Rate)"' \
        "$out/fwd256/ncu_${name}_details.csv" | grep fwd_kernel | awk -F'","' '{print $(NF-2), $(NF-1), $NF}'
    }
    profile_full fwd_2k_fixed --pass fwd --batch 8 --seqlen 2048
    profile_full fwd_2k_varlen --pass fwd --batch 8 --seqlen 2048 --varlen
    for round in 1 2 3; do  # the row itself, forward only, hdim 256 (~30 s a round)
      with_library "$library" timeout --kill-after=10 60 python3 bench/varlen_vs_fixed.py --passes fwd --hdims 256 \
        --reps 20 --commit "$commit" --json "$out/fwd256/varlen_fwd_r$round.json" 2>&1 | grep 'varlen/fixed' | sed -E 's/ +/ /g'
    done
    tar czf "$out/fwd256.tgz" -C "$out/fwd256" . && rm -rf "$out/fwd256" ;;
  peers-stage)  # the first of the peers' two calls (carry .peers/stage1 and .peers/install.sh): seconds
    bash .peers/install.sh stage .peers/stage1 ;;
  peers)  # the second, made at once (carry .peers/stage2, .peers/install.sh and .carry/variants/head):
    # every peer row beside FA4 and cuDNN (bench/peers.py --rows all, issue 16's set), ~350 s
    out=${2:?usage: ready_call.sh peers OUT}
    exports=$(bash .peers/install.sh finish .peers/stage2) || exit 1  # eval "$(...)" would hide a failure
    eval "$exports"
    unpack $head
    DASH_COMMIT=$commit DASH_STEPS=peers DASH_PEERS_LIMIT=${DASH_PEERS_LIMIT:-480} \
      DASH_PEERS_ARGS="--rows all --impls dash_attn,fa4,cudnn --reps 15" scripts/gpu_run.sh "$out/peers" $head \
      > "$out/peers.txt" 2>&1
    echo "peers: exit $?"
    tail -n 40 "$out/peers.txt"
    tar czf "$out/peers.tgz" -C "$out" peers && rm -rf "$out/peers" ;;
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
      with_library $head/src/libdash_attn_capi.so timeout --kill-after=10 120 \
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
  *) echo "usage: ready_call.sh build | build-vwarp | vwarp OUT | fwd256-ncu OUT | peers-stage | peers OUT | suite OUT | varlen OUT" >&2
     exit 2 ;;
esac
