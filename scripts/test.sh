#!/usr/bin/env bash
# Builds everything and runs every test tier that this machine can run: the
# C++ suites through CTest, then the Python package's tests. GPU tests report
# themselves as skipped (never passed) without an sm_90 GPU.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/build.sh
build=${DASH_BUILD_DIR:-build}
ctest --test-dir "$build" --output-on-failure -j2 --timeout 900
if [ -f "$build/src/libdash_attn_capi.so" ]; then export DASH_ATTN_LIBRARY=$PWD/$build/src/libdash_attn_capi.so; fi
PYTHONPATH=$PWD/python${PYTHONPATH:+:$PYTHONPATH} python3 -m pytest -q -rs tests/python
