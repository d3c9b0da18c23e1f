#!/usr/bin/env bash
# Builds a variant of the backward main kernel (a commit, plus patches) and
# links dash-bench and dash_gpu_tests against it into DEST/NAME/, for an A/B
# of several variants in one device call (docs/gpu_workflow.md). Only the
# bwd_main_*.cu translation units and src/host/api.cpp are recompiled (in a
# temporary git worktree, with the flags of the configured build tree); every
# other object comes from that build tree, so the variant may change kernel
# and schedule headers only and must share the build tree's launch interface
# (launch.hpp, host structs).
#   scripts/build_variant.sh NAME [--rev REV] [--dest DIR] [--bench-only] [PATCH ...]
# (--bench-only: no dash_gpu_tests, ~7 MB less to carry; the device call's
# carry is limited to 64 MiB, about four variants with tests.)
#   e.g. scripts/build_variant.sh redecode scripts/experiments/bwd_producer_redecode.patch
#        scripts/build_variant.sh dea6651 --rev dea6651
set -euo pipefail
cd "$(dirname "$0")/.."
here=$PWD
name=${1:?usage: build_variant.sh NAME [--rev REV] [--dest DIR] [--bench-only] [PATCH ...]}
shift
rev=HEAD
dest=.carry/variants
targets="dash-bench dash_gpu_tests"
while [ $# -gt 0 ]; do
  case $1 in
    --rev) rev=$2; shift 2 ;;
    --dest) dest=$2; shift 2 ;;
    --bench-only) targets=dash-bench; shift ;;
    *) break ;;
  esac
done
build=${DASH_BUILD_DIR:-build}
flags_dir=$build/src/CMakeFiles/dash_attn.dir
[ -f "$flags_dir/flags.make" ] || { echo "build_variant.sh: no configured build in $build (run scripts/build.sh)" >&2; exit 1; }
if ! command -v nvcc >/dev/null && [ -x /usr/local/cuda/bin/nvcc ]; then export PATH=/usr/local/cuda/bin:$PATH; fi

work=$(mktemp -d)
git worktree add --detach "$work/tree" "$rev" >/dev/null
trap 'git worktree remove --force "$work/tree"; rm -rf "$work"' EXIT
for patch in "$@"; do
  case $patch in /*) ;; *) patch=$here/$patch ;; esac
  git -C "$work/tree" apply "$patch"
done
ln -s "$here/.deps" "$work/tree/.deps"

# The build's include paths and flags, pointed at the worktree.
sed "s#$here/#$work/tree/#g" "$flags_dir/includes_CUDA.rsp" > "$work/includes.rsp"
cuda_flags=$(sed -n 's/^CUDA_FLAGS = //p' "$flags_dir/flags.make")
# -j2: a backward TU needs ~6 GB and ~30-40 s of one core.
ls "$work"/tree/src/kernels/sm90/bwd_main_sm90_hdim*_*.cu | xargs -P 2 -I{} sh -c \
  'nvcc --options-file "$0/includes.rsp" $1 -c "{}" -o "$0/$(basename "{}").o"' "$work" "$cuda_flags"

# api.cpp builds the schedule object (resolved kind, claim interleave) the
# kernel decodes its claims with, so a schedule patch reaches it too.
cxx_flags=$(sed -n 's/^CXX_FLAGS = //p; s/^CXX_INCLUDES = //p' "$flags_dir/flags.make" | sed "s#$here/#$work/tree/#g" | tr '\n' ' ')
# shellcheck disable=SC2086  # flags are word-split on purpose
c++ $cxx_flags -c "$work/tree/src/host/api.cpp" -o "$work/api.cpp.o"

# The build's library with the variant's objects (same member names).
cp "$build/src/libdash_attn.a" "$work/libdash_attn.a"
(cd "$work" && ar r libdash_attn.a api.cpp.o bwd_main_sm90_hdim*_*.cu.o)

case $dest in /*) out=$dest/$name ;; *) out=$here/$dest/$name ;; esac
mkdir -p "$out"
link() {  # link DIR TARGET: the build's link command against the variant's library
  local cmd
  cmd=$(sed "s#\.\./src/libdash_attn\.a#$work/libdash_attn.a#; s#-o $2 #-o $out/$2 #" \
    "$build/$1/CMakeFiles/$2.dir/link.txt")
  (cd "$build/$1" && eval "$cmd")
  strip "$out/$2"
}
for target in $targets; do
  case $target in dash-bench) link apps dash-bench ;; *) link tests dash_gpu_tests ;; esac
done
echo "build_variant.sh: $rev${*:+ + $*} -> $dest/$name/ ($targets)"
