#!/usr/bin/env bash
# Builds a variant (a commit, plus patches) of dash-bench and dash_gpu_tests
# into DEST/NAME/, for an A/B of several variants in one device call
# (docs/gpu_workflow.md). The variant is an ordinary CMake build of a
# temporary git worktree; --kernels trims it to some rows of the kernel table
# (include/dash_attn/kernel_table.hpp, -DDASH_KERNELS), so a one-kernel
# variant compiles in minutes. Commits before the kernel table build every row.
#   scripts/build_variant.sh NAME [--rev REV] [--dest DIR] [--bench-only]
#                            [--kernels "Backward:BF16:128;..."] [--library] [--packed] [PATCH ...]
# (--bench-only: no dash_gpu_tests, ~5 MB less to carry; the device call's
# carry is limited to 64 MiB. --library: also libdash_attn_capi.so, for the
# Python benchmarks through DASH_ATTN_LIBRARY. --packed: tests, bench and
# library in scripts/gpu_run.sh's layout, xz-compressed by
# scripts/pack_for_device.sh: a build of every row, ~70 MB, carries as ~5 MB.)
#   e.g. scripts/build_variant.sh base --rev 385d331 --bench-only
#        scripts/build_variant.sh h128 --kernels "Backward:BF16:128" my_change.patch
set -euo pipefail
cd "$(dirname "$0")/.."
here=$PWD
name=${1:?usage: build_variant.sh NAME [--rev REV] [--dest DIR] [--bench-only] [--kernels ROWS] [PATCH ...]}
shift
rev=HEAD
dest=.carry/variants
targets="dash-bench dash_gpu_tests"
kernels=""
packed=0
while [ $# -gt 0 ]; do
  case $1 in
    --rev) rev=$2; shift 2 ;;
    --dest) dest=$2; shift 2 ;;
    --bench-only) targets=dash-bench; shift ;;
    --kernels) kernels=$2; shift 2 ;;
    --library) targets="$targets dash_attn_capi"; shift ;;
    --packed) packed=1; targets="dash-bench dash_gpu_tests dash_attn_capi"; shift ;;
    *) break ;;
  esac
done
if ! command -v nvcc >/dev/null && [ -x /usr/local/cuda/bin/nvcc ]; then export PATH=/usr/local/cuda/bin:$PATH; fi

work=$(mktemp -d)
git worktree add --detach "$work/tree" "$rev" >/dev/null
trap 'git worktree remove --force "$work/tree"; rm -rf "$work"' EXIT
for patch in "$@"; do
  case $patch in /*) ;; *) patch=$here/$patch ;; esac
  git -C "$work/tree" apply "$patch"
done
ln -s "$here/.deps" "$work/tree/.deps"
cmake -S "$work/tree" -B "$work/build" -DCMAKE_BUILD_TYPE=Release -DDASH_ENABLE_CUDA=ON \
  ${kernels:+"-DDASH_KERNELS=$kernels"} >/dev/null
# -j2: a backward unit needs ~6 GB and ~2 minutes of one core.
# shellcheck disable=SC2086  # one target per word
cmake --build "$work/build" -j "${DASH_JOBS:-2}" --target $targets

case $dest in /*) out=$dest/$name ;; *) out=$here/$dest/$name ;; esac
if [ "$packed" = 1 ]; then
  # pack_for_device.sh lists its DEST in .git/info/exclude: give it the relative one.
  DASH_PACK_XZ=1 scripts/pack_for_device.sh "$work/build" "${out#"$here"/}"
  echo "build_variant.sh: $rev${*:+ + $*}${kernels:+ (kernels $kernels)} -> $out/binaries.tar.xz"
  exit 0
fi
mkdir -p "$out"
for target in $targets; do
  case $target in
    dash-bench) file=$work/build/apps/dash-bench ;;
    dash_attn_capi) file=$work/build/src/libdash_attn_capi.so ;;
    *) file=$work/build/tests/dash_gpu_tests ;;
  esac
  cp "$file" "$out/"
  strip "$out/$(basename "$file")"
done
echo "build_variant.sh: $rev${*:+ + $*}${kernels:+ (kernels $kernels)} -> $dest/$name/ ($targets)"
