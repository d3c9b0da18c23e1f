#!/usr/bin/env bash
# Installs the pinned header-only CUTLASS/CuTe (PyPI nvidia-cutlass) into .deps/.
# Idempotent; needs only python3 -m pip and access to PyPI.
set -euo pipefail
cd "$(dirname "$0")/.."
version=4.2.0.0
target=.deps/nvidia-cutlass
if [ -f "$target/nvidia_cutlass-$version.dist-info/METADATA" ]; then exit 0; fi
rm -rf "$target"
python3 -m pip install --quiet --disable-pip-version-check --no-deps --target "$target" "nvidia-cutlass==$version"
