// The forward kernels' tile-claim counters (fwd_kernel_sm90.hpp claims from them).
#include <cuda_runtime_api.h>

#include <map>
#include <mutex>
#include <utility>

#include "dash_attn/cuda_check.hpp"
#include "kernels/sm90/launch.hpp"

namespace dash_attn::sm90 {

// One counter per (device, stream), allocated on first use and never freed
// (4 bytes). Launches on one stream run one after the other, and each leaves
// the counter at zero (its last claim resets it), so each finds it at zero;
// launches on different streams may overlap, hence never share a counter.
// cudaMalloc is not allowed while a stream is captured into a graph: a stream
// first seen during capture gets no counter and its kernels take the static
// order (the same tiles, only the CTA that takes each one differs).
int* forward_tile_counter(cudaStream_t stream) {
  static std::mutex mutex;
  static std::map<std::pair<int, cudaStream_t>, int*> counters;
  int device = 0;
  DASH_CUDA_CHECK(cudaGetDevice(&device));
  std::lock_guard<std::mutex> lock(mutex);
  const auto found = counters.find({device, stream});
  if (found != counters.end()) return found->second;
  cudaStreamCaptureStatus capture = cudaStreamCaptureStatusNone;
  DASH_CUDA_CHECK(cudaStreamIsCapturing(stream, &capture));
  if (capture != cudaStreamCaptureStatusNone) return nullptr;
  int* counter = nullptr;
  DASH_CUDA_CHECK(cudaMalloc(&counter, sizeof(int)));
  DASH_CUDA_CHECK(cudaMemsetAsync(counter, 0, sizeof(int), stream));  // ordered before the first launch
  counters.emplace(std::make_pair(device, stream), counter);
  return counter;
}

}  // namespace dash_attn::sm90
