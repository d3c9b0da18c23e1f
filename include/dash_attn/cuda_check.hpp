// Turns a CUDA runtime failure into dash_attn::Error with the call and location.
#pragma once

#include <cuda_runtime_api.h>

#include <string>

#include "dash_attn/error.hpp"

#define DASH_CUDA_CHECK(call)                                                                                \
  do {                                                                                                       \
    const cudaError_t dash_status_ = (call);                                                                 \
    if (dash_status_ != cudaSuccess)                                                                         \
      throw ::dash_attn::Error(::dash_attn::ErrorCode::kCudaError,                                           \
                               std::string(#call) + " failed at " + __FILE__ + ":" + std::to_string(__LINE__) + \
                                   ": " + cudaGetErrorString(dash_status_));                                 \
  } while (0)
