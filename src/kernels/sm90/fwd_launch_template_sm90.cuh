// Host side of one compiled forward kernel: arguments -> Params, grid, launch.
// Included only by the per-instantiation files fwd_<dtype>_hdim<d>_sm90.cu.
#pragma once

#include <cuda_runtime_api.h>

#include "../../host/forward_plan.hpp"
#include "cuda_check.hpp"
#include "fwd_instantiations_sm90.hpp"
#include "fwd_kernel_sm90.cuh"

namespace dash_attn::sm90 {

template <DType kDType>
using CutlassElement = std::conditional_t<kDType == DType::kBF16, cutlass::bfloat16_t, cutlass::half_t>;

template <DType kDType, int kHeadDim>
void run_forward_sm90(ForwardArgs const& args, float softmax_scale, bool causal, cudaStream_t stream) {
  using Kernel = FwdKernelSm90<FwdTraits<CutlassElement<kDType>, kHeadDim>>;
  auto* kernel = &fwd_kernel_sm90<Kernel>;
  static const bool configured = [&] {
    DASH_CUDA_CHECK(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, Kernel::kSharedBytes));
    return true;
  }();
  (void)configured;
  int device = 0, sm_count = 0;
  DASH_CUDA_CHECK(cudaGetDevice(&device));
  DASH_CUDA_CHECK(cudaDeviceGetAttribute(&sm_count, cudaDevAttrMultiProcessorCount, device));
  const typename Kernel::Params params{Kernel::Mainloop::to_params(args, softmax_scale),
                                       Kernel::Epilogue::to_params(args), host::plan_forward(args.shape, causal, sm_count),
                                       forward_tile_counter(stream)};
  kernel<<<params.plan.grid, Kernel::kThreads, Kernel::kSharedBytes, stream>>>(params);
  DASH_CUDA_CHECK(cudaGetLastError());
}

}  // namespace dash_attn::sm90
