// The one dispatch point of the forward pass: (dtype, head_dim) -> the
// compiled kernel of DASH_FWD_INSTANTIATIONS.
#include <cuda_runtime_api.h>

#include <map>
#include <mutex>
#include <string>
#include <utility>

#include "fwd_instantiations_sm90.hpp"
#include "cuda_check.hpp"
#include "launch.hpp"

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

void launch_forward(const ForwardArgs& args, float softmax_scale, bool causal, int sm_count, cudaStream_t stream) {
  // The row maximum is taken on raw scores and scaled afterwards, which is
  // only the maximum of the scaled scores when the scale is positive.
  if (!(softmax_scale > 0.0f))
    throw Error(ErrorCode::kNotSupported, "forward: the sm90 kernel needs a positive softmax_scale, got " +
                                              std::to_string(softmax_scale));
#define DASH_FWD_DISPATCH(kDType, kHeadDim)                                  \
  if (args.dtype == DType::kDType && args.shape.head_dim == kHeadDim) {         \
    run_forward_sm90<DType::kDType, kHeadDim>(args, softmax_scale, causal, sm_count, stream); \
    return;                                                                     \
  }
  DASH_FWD_INSTANTIATIONS(DASH_FWD_DISPATCH)
#undef DASH_FWD_DISPATCH
  throw Error(ErrorCode::kNotSupported, "forward: no sm90 kernel is compiled for dtype " +
                                            std::string(to_string(args.dtype)) + " with head_dim " +
                                            std::to_string(args.shape.head_dim));
}

}  // namespace dash_attn::sm90
