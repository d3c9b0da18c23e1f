#!/usr/bin/env bash
# Copies the binaries a GPU run needs from a build tree into a small folder
# with the same layout (tests/, apps/, src/), to pass as `carry` to the lent
# GPU machine; then run there: scripts/gpu_run.sh "$OUT" <that folder>.
#   scripts/pack_for_device.sh [BUILD_DIR] [DEST]   (defaults: build .carry)
# DASH_PACK_XZ=1 leaves only DEST/binaries.tar.xz (~4 MB instead of ~33 MB:
# the fatbins compress ~8x), so the peers' 50 MB stage1 travels beside it;
# gpu_run.sh unpacks it in place.
set -euo pipefail
cd "$(dirname "$0")/.."
build=${1:-build}
dest=${2:-.carry}
grep -qxF "/$dest/" .git/info/exclude 2>/dev/null || echo "/$dest/" >> .git/info/exclude
rm -rf "$dest"
mkdir -p "$dest/tests" "$dest/apps" "$dest/src"
cp "$build/tests/dash_gpu_tests" "$dest/tests/"
cp "$build/apps/dash-bench" "$dest/apps/"
cp "$build/src/libdash_attn_capi.so" "$dest/src/"
strip "$dest"/tests/* "$dest"/apps/* 2>/dev/null || true
if [ "${DASH_PACK_XZ:-0}" = 1 ]; then
  tar -C "$dest" -cJf "$dest/binaries.tar.xz" tests apps src
  rm -rf "$dest/tests" "$dest/apps" "$dest/src"
fi
du -sh "$dest"
