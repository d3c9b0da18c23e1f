// Lets one definition serve both the CUDA kernels and host code (the model,
// the tests) compiled by a plain C++ compiler.
#pragma once

#if defined(__CUDACC__)
#define DASH_HOST_DEVICE __host__ __device__
#else
#define DASH_HOST_DEVICE
#endif
