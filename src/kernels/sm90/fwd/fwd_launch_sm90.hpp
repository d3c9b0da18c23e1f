// Host side of one compiled forward kernel: arguments -> Params, launch.
// Included only by the generated instance units (cmake/kernel_table.cmake).
#pragma once

#include <cuda_runtime_api.h>

#include "dash_attn/cuda_check.hpp"
#include "fwd_kernel_sm90.hpp"
#include "kernels/sm90/common/launch_sm90.hpp"
#include "kernels/sm90/common/tma_sm90.hpp"
#include "kernels/sm90/launch.hpp"

namespace dash_attn::sm90 {

template <DType kDType>
using CutlassElement = std::conditional_t<kDType == DType::kBF16, cutlass::bfloat16_t, cutlass::half_t>;

template <DType kDType, int kHeadDim>
void run_forward(const ForwardArgs& args, float softmax_scale, const schedule::ForwardPlan& plan, cudaStream_t stream) {
  using Kernel = fwd::FwdKernelSm90<fwd::FwdTraits<CutlassElement<kDType>, kHeadDim>>;
  allow_dynamic_shared_memory<&fwd::fwd_kernel_sm90<Kernel>>(Kernel::kSharedBytes);
  const typename Kernel::Params params{Kernel::Mainloop::to_params(args, softmax_scale),
                                       Kernel::Epilogue::to_params(args), plan, forward_tile_counter(stream)};
  check_tma_descriptor(params.mainloop.tma_q, "forward", "q");
  check_tma_descriptor(params.mainloop.tma_k, "forward", "k");
  check_tma_descriptor(params.mainloop.tma_v, "forward", "v");
  fwd::fwd_kernel_sm90<Kernel><<<plan.grid, Kernel::kThreads, Kernel::kSharedBytes, stream>>>(params);
  DASH_CUDA_CHECK(cudaGetLastError());
}

}  // namespace dash_attn::sm90
