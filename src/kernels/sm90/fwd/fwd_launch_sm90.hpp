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

template <class Kernel>
void launch_forward_kernel(const ForwardArgs& tensors, const ForwardConfig& config,
                           const decltype(Kernel::Params::plan)& plan, int grid, cudaStream_t stream) {
  allow_dynamic_shared_memory<&fwd::fwd_kernel_sm90<Kernel>>(Kernel::kSharedBytes);
  const typename Kernel::Params params{Kernel::Mainloop::to_params(tensors, config),
                                       Kernel::Epilogue::to_params(tensors), plan, forward_tile_counter(stream)};
  check_tma_descriptor(params.mainloop.tma_q, "forward", "q");
  check_tma_descriptor(params.mainloop.tma_k, "forward", "k");
  check_tma_descriptor(params.mainloop.tma_v, "forward", "v");
  fwd::fwd_kernel_sm90<Kernel><<<grid, Kernel::kThreads, Kernel::kSharedBytes, stream>>>(params);
  DASH_CUDA_CHECK(cudaGetLastError());
}

template <DType kDType, int kHeadDim, bool kScoreMods>
void run_forward(const ForwardArgs& args, const ForwardConfig& config, const schedule::ForwardPlan& plan,
                 cudaStream_t stream) {
  using Kernel = fwd::FwdKernelSm90<fwd::FwdTraits<CutlassElement<kDType>, kHeadDim, kScoreMods>>;
  launch_forward_kernel<Kernel>(args, config, plan, plan.grid, stream);
}

// The packed tensors as TMA and the epilogue see them: one sequence of
// total_q (total_k) rows; the kernel offsets each tile by its sequence's first row.
inline ForwardArgs packed_tensors(const VarlenForwardArgs& a) {
  ForwardArgs packed;
  packed.shape = ProblemShape{1, a.lengths.total_q, a.lengths.total_k, a.shape.heads_q, a.shape.heads_kv, a.shape.head_dim};
  packed.dtype = a.dtype;
  packed.q = a.q;
  packed.k = a.k;
  packed.v = a.v;
  packed.out = a.out;
  packed.lse = a.lse;
  packed.sinks = a.sinks;
  return packed;
}

template <DType kDType, int kHeadDim, bool kScoreMods>
void run_forward_varlen(const VarlenForwardArgs& args, const ForwardConfig& config,
                        const schedule::VarlenForwardTiles& tiles, cudaStream_t stream) {
  using Kernel =
      fwd::FwdKernelSm90<fwd::FwdTraits<CutlassElement<kDType>, kHeadDim, kScoreMods>, schedule::VarlenForwardTiles>;
  launch_forward_kernel<Kernel>(packed_tensors(args), config, tiles, tiles.grid, stream);
}

}  // namespace dash_attn::sm90
