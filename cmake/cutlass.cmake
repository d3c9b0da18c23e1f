# CUTLASS/CuTe, headers only, pinned. Sources, in order of preference:
#  1. DASH_CUTLASS_DIR: the include/ folder of any CUTLASS checkout;
#  2. the PyPI package nvidia-cutlass==${DASH_CUTLASS_PYPI_VERSION}, installed by
#     scripts/install_deps.sh into .deps/ (or importable by python3);
#  3. DASH_FETCH_CUTLASS=ON: FetchContent of the matching upstream tag.
set(DASH_CUTLASS_VERSION "4.2.0")
set(DASH_CUTLASS_PYPI_VERSION "4.2.0.0")
set(DASH_CUTLASS_DIR "" CACHE PATH "include/ folder of a CUTLASS checkout (overrides the pinned package)")
option(DASH_FETCH_CUTLASS "Fetch CUTLASS v${DASH_CUTLASS_VERSION} with FetchContent (needs internet)" OFF)

set(_dash_cutlass_include "")
if(DASH_CUTLASS_DIR)
  set(_dash_cutlass_include "${DASH_CUTLASS_DIR}")
elseif(DASH_FETCH_CUTLASS)
  include(FetchContent)
  FetchContent_Declare(cutlass GIT_REPOSITORY https://github.com/NVIDIA/cutlass.git
                       GIT_TAG "v${DASH_CUTLASS_VERSION}" GIT_SHALLOW TRUE)
  FetchContent_GetProperties(cutlass)
  if(NOT cutlass_POPULATED)
    FetchContent_Populate(cutlass)
  endif()
  set(_dash_cutlass_include "${cutlass_SOURCE_DIR}/include")
else()
  set(_dash_pip_include "${PROJECT_SOURCE_DIR}/.deps/nvidia-cutlass/cutlass_library/source/include")
  if(EXISTS "${_dash_pip_include}/cute/tensor.hpp")
    set(_dash_cutlass_include "${_dash_pip_include}")
  else()
    find_package(Python3 COMPONENTS Interpreter QUIET)
    if(Python3_FOUND)
      execute_process(
        COMMAND "${Python3_EXECUTABLE}" -c
                "import cutlass_library, os; print(os.path.join(os.path.dirname(cutlass_library.__file__), 'source', 'include'))"
        OUTPUT_VARIABLE _dash_py_include OUTPUT_STRIP_TRAILING_WHITESPACE ERROR_QUIET)
      if(_dash_py_include AND EXISTS "${_dash_py_include}/cute/tensor.hpp")
        set(_dash_cutlass_include "${_dash_py_include}")
      endif()
    endif()
  endif()
endif()

if(NOT EXISTS "${_dash_cutlass_include}/cutlass/version.h")
  message(FATAL_ERROR
    "CUTLASS headers not found. Run scripts/install_deps.sh (installs nvidia-cutlass==${DASH_CUTLASS_PYPI_VERSION} "
    "into .deps/), or set -DDASH_CUTLASS_DIR=<cutlass>/include, or -DDASH_FETCH_CUTLASS=ON.")
endif()
file(STRINGS "${_dash_cutlass_include}/cutlass/version.h" _dash_major REGEX "#define CUTLASS_MAJOR [0-9]+")
file(STRINGS "${_dash_cutlass_include}/cutlass/version.h" _dash_minor REGEX "#define CUTLASS_MINOR [0-9]+")
string(REGEX MATCH "[0-9]+$" _dash_major "${_dash_major}")
string(REGEX MATCH "[0-9]+$" _dash_minor "${_dash_minor}")
if(NOT "${_dash_major}.${_dash_minor}" VERSION_EQUAL "4.2")
  message(WARNING "dash_attn is tested with CUTLASS ${DASH_CUTLASS_VERSION}; found ${_dash_major}.${_dash_minor} in ${_dash_cutlass_include}")
endif()
message(STATUS "dash_attn: CUTLASS ${_dash_major}.${_dash_minor} headers from ${_dash_cutlass_include}")

add_library(dash_cutlass INTERFACE)
target_include_directories(dash_cutlass SYSTEM INTERFACE "${_dash_cutlass_include}")
# The wgmma shapes whose N is not 2^k or 96 (e.g. hdim 256's 80-key forward
# tile): without this, CuTe's op selectors fall back to n16 for them (a
# 176-key tile issued 198 instead of 38 HGMMA per step and ran at 0.75x on
# the H200, 2026-12-02). Tiles whose N is a power of two select the same
# instruction either way.
target_compile_definitions(dash_cutlass INTERFACE CUTE_SM90_EXTENDED_MMA_SHAPES_ENABLED)
