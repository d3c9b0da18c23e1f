# Enables CUDA for the sm_90a kernels, or stops with a sentence that names what
# is missing and the two ways out, instead of CMake's "No CMAKE_CUDA_COMPILER
# could be found". Included by the top-level CMakeLists.txt when
# DASH_ENABLE_CUDA is ON (the default, and what `pip install .` builds).
# The compiler is looked for as CMake does (CMAKE_CUDA_COMPILER, CUDACXX, nvcc
# on PATH or in $CUDA_PATH/bin), without a second test configure.
string(CONCAT _dash_cuda_needs "dash_attn's sm_90a kernels need nvcc from CUDA 13 or newer (DASH_ENABLE_CUDA=ON), and ")
string(CONCAT _dash_cuda_ways_out
  " Either install CUDA 13 and put its nvcc on PATH (or set CUDACXX=/path/to/cuda-13/bin/nvcc), "
  "or configure with -DDASH_ENABLE_CUDA=OFF to build only the host part (schedules, model, reference, "
  "validation; no kernels, no Python library); scripts/build.sh does the latter by itself when nvcc is absent.")

if(NOT CMAKE_CUDA_COMPILER)
  unset(CMAKE_CUDA_COMPILER CACHE)  # a NOTFOUND left by an earlier try: look again
  if(DEFINED ENV{CUDACXX})
    get_filename_component(_dash_nvcc "$ENV{CUDACXX}" PROGRAM)
    if(NOT EXISTS "${_dash_nvcc}")
      message(FATAL_ERROR "${_dash_cuda_needs}CUDACXX=$ENV{CUDACXX} does not exist.${_dash_cuda_ways_out}")
    endif()
  else()
    find_program(_dash_nvcc nvcc HINTS "$ENV{CUDA_PATH}/bin" NO_CACHE)
    if(NOT _dash_nvcc)
      message(FATAL_ERROR "${_dash_cuda_needs}nvcc was not found (not on PATH, CUDACXX not set).${_dash_cuda_ways_out}")
    endif()
  endif()
elseif(IS_ABSOLUTE "${CMAKE_CUDA_COMPILER}" AND NOT EXISTS "${CMAKE_CUDA_COMPILER}")
  message(FATAL_ERROR "${_dash_cuda_needs}CMAKE_CUDA_COMPILER=${CMAKE_CUDA_COMPILER} does not exist.${_dash_cuda_ways_out}")
endif()
enable_language(CUDA)
if(NOT CMAKE_CUDA_COMPILER_ID STREQUAL "NVIDIA" OR CMAKE_CUDA_COMPILER_VERSION VERSION_LESS 13)
  message(FATAL_ERROR "${_dash_cuda_needs}the CUDA compiler found is ${CMAKE_CUDA_COMPILER_ID} "
    "${CMAKE_CUDA_COMPILER_VERSION} (${CMAKE_CUDA_COMPILER}).${_dash_cuda_ways_out}")
endif()
