// Host side of one compiled forward kernel: arguments -> Params, launch.
// Included only by the generated instance units (cmake/kernel_table.cmake).
#pragma once

#include <cuda_runtime_api.h>

#include "dash_attn/cuda_check.hpp"
#include "dash_attn/error.hpp"
#include "dash_attn/tile_config.hpp"
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
  if constexpr (Kernel::Traits::kStoreOByTma) check_tma_descriptor(params.epilogue.tma_o, "forward", "out");
  fwd::fwd_kernel_sm90<Kernel><<<grid, Kernel::kThreads, Kernel::kSharedBytes, stream>>>(params);
  DASH_CUDA_CHECK(cudaGetLastError());
}

// The kernel of the row whose tile the plan chose (forward_tile_for): the
// tall tile where the head_dim compiles one, else the 128-row tile. A plan
// with any other tile is refused rather than run with the wrong counts.
template <DType kDType, int kHeadDim, bool kScoreMods, class Tiles>
void launch_planned_forward(const char* function, const ForwardArgs& tensors, const ForwardConfig& config,
                            const Tiles& plan, int grid, cudaStream_t stream) {
  using Element = CutlassElement<kDType>;
  const TileShape tall = forward_tile(kHeadDim, true), standard = forward_tile(kHeadDim, false);
  const bool is_tall = forward_has_tall_tile(kHeadDim) && plan.tile.block_m == tall.block_m &&
                       plan.tile.block_n == tall.block_n;
  if (!is_tall && (plan.tile.block_m != standard.block_m || plan.tile.block_n != standard.block_n))
    throw Error(ErrorCode::kNotSupported, std::string("dash_attn::") + function + ": the plan's " +
                                                 std::to_string(plan.tile.block_m) + " x " +
                                                 std::to_string(plan.tile.block_n) +
                                                 " tile is not one this head_dim's forward kernel compiles");
  if constexpr (forward_has_tall_tile(kHeadDim)) {
    if (is_tall) {
      using Kernel = fwd::FwdKernelSm90<fwd::FwdTraits<Element, kHeadDim, kScoreMods, true>, Tiles>;
      return launch_forward_kernel<Kernel>(tensors, config, plan, grid, stream);
    }
  }
  using Kernel = fwd::FwdKernelSm90<fwd::FwdTraits<Element, kHeadDim, kScoreMods, false>, Tiles>;
  launch_forward_kernel<Kernel>(tensors, config, plan, grid, stream);
}

template <DType kDType, int kHeadDim, bool kScoreMods>
void run_forward(const ForwardArgs& args, const ForwardConfig& config, const schedule::ForwardPlan& plan,
                 cudaStream_t stream) {
  launch_planned_forward<kDType, kHeadDim, kScoreMods>("forward", args, config, plan, plan.grid, stream);
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
  launch_planned_forward<kDType, kHeadDim, kScoreMods>("forward_varlen", packed_tensors(args), config, tiles,
                                                       tiles.grid, stream);
}

}  // namespace dash_attn::sm90
