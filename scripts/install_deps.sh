#!/usr/bin/env bash
# Installs what the build and tests need: from PyPI the pinned header-only
# CUTLASS/CuTe (nvidia-cutlass) into .deps/ and pytest if it is missing; from
# Debian the header-only CLI11 and nlohmann-json (dash-bench's and
# dash-model's command lines and JSON files) if the compiler cannot find them.
# Idempotent; needs python3 -m pip and access to PyPI, and root (or
# password-less sudo) and apt for the Debian packages when they are missing.
set -euo pipefail
cd "$(dirname "$0")/.."
version=4.2.0.0
target=.deps/nvidia-cutlass
if [ ! -f "$target/nvidia_cutlass-$version.dist-info/METADATA" ]; then
  rm -rf "$target"
  python3 -m pip install --quiet --disable-pip-version-check --no-deps --target "$target" "nvidia-cutlass==$version"
fi
python3 -c 'import pytest' 2>/dev/null || python3 -m pip install --quiet --disable-pip-version-check pytest

# Header-only C++ libraries: present when the compiler finds their header.
header_found() { echo "#include <$1>" | "${CXX:-c++}" -std=c++20 -E -x c++ - >/dev/null 2>&1; }
missing=()
header_found CLI/CLI.hpp || missing+=(libcli11-dev)
header_found nlohmann/json.hpp || missing+=(nlohmann-json3-dev)
if [ ${#missing[@]} -gt 0 ]; then
  as_root=()
  if [ "$(id -u)" -ne 0 ]; then
    if command -v sudo >/dev/null && sudo -n true 2>/dev/null; then as_root=(sudo -n); else as_root=(false); fi
  fi
  install() { "${as_root[@]}" env DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends "${missing[@]}"; }
  # A fresh image may have no package lists yet: update once and retry.
  if ! command -v apt-get >/dev/null || ! { install >/dev/null 2>&1 || { "${as_root[@]}" apt-get update -qq && install; }; } ||
     ! header_found CLI/CLI.hpp || ! header_found nlohmann/json.hpp; then
    echo "install_deps.sh: cannot install the Debian packages ${missing[*]} (needs apt-get as root);" \
         "install them, e.g. apt-get install -y --no-install-recommends ${missing[*]}" >&2
    exit 1
  fi
fi
