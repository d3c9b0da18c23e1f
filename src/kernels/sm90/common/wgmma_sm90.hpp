// wgmma helpers of both passes: issue one warpgroup GEMM as a commit group,
// and reinterpret an fp32 accumulator fragment (converted to 16 bits) as the
// register A operand of the next GEMM (P V in the forward, dS K and dS^T Q in
// the backward).
#pragma once

#include <cute/tensor.hpp>
#include <cute/atom/mma_traits_sm90_gmma.hpp>

namespace dash_attn::sm90 {

// C (+)= A B over every k block; one wgmma commit group. The caller waits
// with warpgroup_wait<N>() before reading C.
template <bool kZeroInit, class TiledMma, class TensorA, class TensorB, class TensorC>
__device__ __forceinline__ void wgmma_gemm(TiledMma& mma, const TensorA& a, const TensorB& b, TensorC& c) {
  // Descriptor fragments (SS) are register tensors too; 16-bit values mean RS.
  using namespace cute;
  constexpr bool kRegisterA = sizeof_bits_v<typename TensorA::value_type> == 16;
  if constexpr (kRegisterA) warpgroup_fence_operand(const_cast<TensorA&>(a));
  warpgroup_fence_operand(c);
  warpgroup_arrive();
  if constexpr (kZeroInit) mma.accumulate_ = GMMA::ScaleOut::Zero;
  CUTE_UNROLL
  for (int k = 0; k < size<2>(a); ++k) {
    cute::gemm(mma, a(_, _, k), b(_, _, k), c);
    mma.accumulate_ = GMMA::ScaleOut::One;
  }
  warpgroup_commit_batch();
  warpgroup_fence_operand(c);
  if constexpr (kRegisterA) warpgroup_fence_operand(const_cast<TensorA&>(a));
}

// The first thread of the calling thread's warpgroup among `thread`'s
// numbering, as a value the compiler can see is the same in every lane (a
// shuffle from lane 0). wgmma's shared-memory operands depend on the
// warpgroup only, so partitioning them with this index instead of the
// thread's own lets ptxas build their descriptors in uniform registers;
// from the thread index it built them in vector registers and moved each to
// a uniform one (R2UR) right before its HGMMA.
__device__ __forceinline__ int warpgroup_first_thread(int thread) {
  return __shfl_sync(0xffffffffu, thread / 128, 0) * 128;
}

// Accumulator ((2, 2, N/8), M, N') of an m64nNk16 wgmma -> A operand
// ((2, 2, 2), M, K/16) of a 16-bit wgmma whose K is that N: each k16 block
// takes two of the accumulator's 8-column groups.
template <class AccLayout>
__host__ __device__ __forceinline__ constexpr auto accumulator_as_a_operand(AccLayout acc) {
  using namespace cute;
  static_assert(rank<0>(AccLayout{}) == 3, "expected an sm90 wgmma accumulator layout");
  auto groups = logical_divide(get<0, 2>(acc), Tile<_2>{});  // ((2, N/16))
  return make_layout(make_layout(get<0, 0>(acc), get<0, 1>(acc), get<0, 0>(groups)), get<1>(acc),
                     coalesce(make_layout(get<0, 1>(groups), get<2>(acc))));
}

// Rounds an fp32 fragment to Element (round to nearest even), same layout.
template <class Element, class Fragment>
__device__ __forceinline__ auto convert_fragment(const Fragment& in) {
  using namespace cute;
  auto out = make_tensor<Element>(in.layout());
  CUTE_UNROLL
  for (int i = 0; i < size(in); ++i) out(i) = static_cast<Element>(in(i));
  return out;
}

}  // namespace dash_attn::sm90
