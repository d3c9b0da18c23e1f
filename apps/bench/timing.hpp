// CUDA-event timing: warm-up, an idle pause, then the median, min and max of
// many repetitions.
#pragma once

#include <cuda_runtime_api.h>

#include <algorithm>
#include <chrono>
#include <thread>
#include <vector>

#include "dash_attn/cuda_check.hpp"

namespace dash_attn::bench {

struct Timing {
  double median_ms = 0, min_ms = 0, max_ms = 0;
};

// settle_ms: the GPU idles that long after the warm-up, so the clock the
// timed calls run at is not the one the previous row left (bench/cuda_timing.py
// says why: at the 700 W limit the SM clock sits at 1.4-1.7 GHz during
// seconds of backwards and needs ~0.2 s to climb back to 1.98 GHz; H100,
// 2026-12-06: the same launch read 436 and 463 TFLOPS as two rows of one
// back-to-back run, hdim 64 full 8k auto / descending).
template <class Call>
Timing time_calls(Call call, int warmup, int repetitions, int settle_ms) {
  for (int i = 0; i < warmup; ++i) call();
  DASH_CUDA_CHECK(cudaDeviceSynchronize());
  std::this_thread::sleep_for(std::chrono::milliseconds(settle_ms));
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
