// Host side of one compiled forward kernel: arguments -> Params, grid, launch.
// Included only by the per-instantiation files fwd_<dtype>_hdim<d>_sm90.cu.
#pragma once

#include <cuda_runtime_api.h>

#include "../../host/forward_plan.hpp"
#include "cuda_check.hpp"
#include "fwd_instantiations_sm90.hpp"
#include "fwd_kernel_sm90.cuh"
#include "tma_check.hpp"

namespace dash_attn::sm90 {

template <DType kDType>
using CutlassElement = std::conditional_t<kDType == DType::kBF16, cutlass::bfloat16_t, cutlass::half_t>;

template <DType kDType, int kHeadDim>
void run_forward_sm90(ForwardArgs const& args, float softmax_scale, bool causal, int sm_count, cudaStream_t stream) {
  using Kernel = FwdKernelSm90<FwdTraits<CutlassElement<kDType>, kHeadDim>>;
  auto* kernel = &fwd_kernel_sm90<Kernel>;
  static const bool configured = [&] {
    DASH_CUDA_CHECK(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, Kernel::kSharedBytes));
    return true;
  }();
  (void)configured;
  const typename Kernel::Params params{Kernel::Mainloop::to_params(args, softmax_scale),
                                       Kernel::Epilogue::to_params(args), host::plan_forward(args.shape, causal, sm_count),
                                       forward_tile_counter(stream)};
  check_tma_descriptor(params.mainloop.tma_q, "forward", "q");
  check_tma_descriptor(params.mainloop.tma_k, "forward", "k");
  check_tma_descriptor(params.mainloop.tma_v, "forward", "v");
  kernel<<<params.plan.grid, Kernel::kThreads, Kernel::kSharedBytes, stream>>>(params);
  DASH_CUDA_CHECK(cudaGetLastError());
}

}  // namespace dash_attn::sm90
