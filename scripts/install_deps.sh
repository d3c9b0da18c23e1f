#!/usr/bin/env bash
# Installs what the build and tests need from PyPI: the pinned header-only
# CUTLASS/CuTe (nvidia-cutlass) into .deps/, and pytest if it is missing.
# Idempotent; needs python3 -m pip and access to PyPI.
set -euo pipefail
cd "$(dirname "$0")/.."
version=4.2.0.0
target=.deps/nvidia-cutlass
if [ ! -f "$target/nvidia_cutlass-$version.dist-info/METADATA" ]; then
  rm -rf "$target"
  python3 -m pip install --quiet --disable-pip-version-check --no-deps --target "$target" "nvidia-cutlass==$version"
fi
python3 -c 'import pytest' 2>/dev/null || python3 -m pip install --quiet --disable-pip-version-check pytest
