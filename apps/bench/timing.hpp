// CUDA-event timing: warm-up, then the median, min and max of many repetitions.
#pragma once

#include <cuda_runtime_api.h>

#include <algorithm>
#include <vector>

#include "dash_attn/cuda_check.hpp"

namespace dash_attn::bench {

struct Timing {
  double median_ms = 0, min_ms = 0, max_ms = 0;
};

template <class Call>
Timing time_calls(Call call, int warmup, int repetitions) {
  for (int i = 0; i < warmup; ++i) call();
  cudaEvent_t start, stop;
  DASH_CUDA_CHECK(cudaEventCreate(&start));
  DASH_CUDA_CHECK(cudaEventCreate(&stop));
  std::vector<double> ms(repetitions);
  for (double& sample : ms) {
    DASH_CUDA_CHECK(cudaEventRecord(start));
    call();
    DASH_CUDA_CHECK(cudaEventRecord(stop));
    DASH_CUDA_CHECK(cudaEventSynchronize(stop));
    float elapsed = 0;
    DASH_CUDA_CHECK(cudaEventElapsedTime(&elapsed, start, stop));
    sample = elapsed;
  }
  cudaEventDestroy(start);
  cudaEventDestroy(stop);
  std::sort(ms.begin(), ms.end());
  return Timing{ms[ms.size() / 2], ms.front(), ms.back()};
}

}  // namespace dash_attn::bench
