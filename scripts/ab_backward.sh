#!/usr/bin/env bash
# On the GPU: the backward (DASH_AB_PASSES=fwd: forward; fwd,bwd: both) rows
# of several dash-bench builds, run alternately
# (A B C, A B C, ...) in one call so that they share the machine's state, each
# run under a watchdog; logs go to OUT/ab/NAME.ROUND.log and are tarred into
# OUT/ab.tgz (a call returns at most 8 files). Tabulate them here with
# bench/ab_table.py. Variants come from scripts/build_variant.sh.
#   scripts/ab_backward.sh OUT "DASH-BENCH OPTIONS" NAME=DASH_BENCH [NAME=DASH_BENCH ...]
#   e.g. scripts/ab_backward.sh "$OUT" "--hdims 256 --schedules atomic,auto" \
#          head=.carry/apps/dash-bench redecode=.carry/variants/redecode/dash-bench
# DASH_AB_ROUNDS (2) rounds, DASH_AB_LIMIT (90) seconds per run.
set -uo pipefail
out=${1:?usage: ab_backward.sh OUT "OPTIONS" NAME=DASH_BENCH ...}
options=$2
shift 2
mkdir -p "$out/ab"
for round in $(seq 1 "${DASH_AB_ROUNDS:-2}"); do
  for variant in "$@"; do
    name=${variant%%=*}
    binary=${variant#*=}
    # shellcheck disable=SC2086  # options are word-split on purpose
    timeout --kill-after=10 "${DASH_AB_LIMIT:-90}" "$binary" --passes "${DASH_AB_PASSES:-bwd}" --reps 12 --determinism-runs 2 \
      --verify-max-seqlen 1024 $options > "$out/ab/$name.$round.log" 2>&1
    echo "$name round $round: exit $?"
  done
done
tar czf "$out/ab.tgz" -C "$out" ab && rm -rf "$out/ab"
