#!/usr/bin/env bash
# On the GPU: an A/B of C ABI libraries (scripts/build_variant.sh --library)
# through one of the Python benchmarks, variants alternated (A B C, A B C, ...)
# in one call so they share the machine's state; JSON per run in
# OUT/ab/BENCH_NAME.ROUND.json, tabulated here by bench/ab_library_table.py.
#   scripts/ab_library.sh OUT ROUNDS BENCH "BENCH OPTIONS" NAME=LIBRARY [NAME=LIBRARY ...]
# BENCH: peers (bench/peers.py, dash_attn det. only unless the options say
# --impls) or varlen_vs_fixed. E.g. (thirty-first session, 2 x 3 x 20 s + 2 x 3 x 14 s):
#   scripts/ab_library.sh "$OUT" 2 peers "--rows standard,gqa --hdims 64,128 --seqlens 512,2048 --reps 10" \
#     head=.carry/variants/head/libdash_attn_capi.so r0=.carry/variants/r0/libdash_attn_capi.so
set -uo pipefail
out=${1:?usage: ab_library.sh OUT ROUNDS BENCH "OPTIONS" NAME=LIBRARY ...}
rounds=$2 bench=$3 options=$4
shift 4
here=$(cd "$(dirname "$0")/.." && pwd)
case $bench in
  peers) command=("$here/bench/peers.py" --impls dash_attn:det --latest-json none) ;;
  varlen_vs_fixed) command=("$here/bench/varlen_vs_fixed.py") ;;
  *) echo "ab_library.sh: BENCH is peers or varlen_vs_fixed, not '$bench'" >&2; exit 2 ;;
esac
mkdir -p "$out/ab"
for round in $(seq 1 "$rounds"); do
  for variant in "$@"; do
    name=${variant%%=*}
    library=$(cd "$(dirname "${variant#*=}")" && pwd)/$(basename "${variant#*=}")
    # shellcheck disable=SC2086  # options are word-split on purpose
    DASH_ATTN_LIBRARY=$library PYTHONPATH="$here/python${PYTHONPATH:+:$PYTHONPATH}" \
      timeout --kill-after=10 "${DASH_AB_LIMIT:-200}" python3 "${command[@]}" $options \
      --json "$out/ab/${bench}_$name.$round.json" > "$out/ab/${bench}_$name.$round.log" 2>&1
    echo "$bench $name round $round: exit $? ($(date +%T))"
  done
done
