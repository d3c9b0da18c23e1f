// Compile-time shape of the forward kernel for one (element type, head_dim):
// tiles, warp roles, register split, shared-memory layouts and the two
// warpgroup GEMMs. Everything else in fwd_* reads its constants from here.
#pragma once

#include <cute/tensor.hpp>
#include <cute/atom/mma_atom.hpp>
#include <cute/atom/copy_traits_sm90_tma.hpp>
#include <cutlass/arch/barrier.h>
#include <cutlass/numeric_types.h>
#include <cutlass/pipeline/pipeline.hpp>

#include "dash_attn/tile_config.hpp"

namespace dash_attn::sm90::fwd {

// kScoreMods_: the kernel honours sliding windows (left bounds) and a
// softcap (the ScoreMods rows of the kernel table); without, exactly the
// no-mask / causal kernel. Both add sinks in the epilogue. kTall_: the tall
// tile (tile_config.hpp).
template <class Element_, int kHeadDim_, bool kScoreMods_ = false, bool kTall_ = false>
struct FwdTraits {
  using Element = Element_;
  static constexpr int kHeadDim = kHeadDim_;
  static constexpr bool kScoreMods = kScoreMods_;
  static constexpr int kBlockM = forward_tile(kHeadDim, kTall_).block_m;
  static constexpr int kBlockN = forward_tile(kHeadDim, kTall_).block_n;
  // Two K and two V stages: the producer loads block n-1 while the consumers
  // multiply block n. A third does not fit at hdim 128/256 (Q + 3 K + 3 V > 227 KB).
  static constexpr int kStages = 2;

  // One producer warpgroup (a single thread issues TMA) and one consumer
  // warpgroup per 64 query rows of a tile: two, or three on the tall tile.
  static constexpr int kConsumerWarpgroups = kBlockM / 64;
  static constexpr int kConsumerThreads = 128 * kConsumerWarpgroups;
  static constexpr int kThreads = 128 + kConsumerThreads;
  static_assert(kBlockM == 64 * kConsumerWarpgroups, "each consumer warpgroup owns one 64-row wgmma tile");
  static_assert(kConsumerWarpgroups == 2 || kConsumerWarpgroups == 3, "register split below");
  // setmaxnreg moves registers within the CTA's launch allocation (65536 /
  // threads per thread, rounded down to 8: 168 at 384 threads, 128 at 512);
  // what the consumers gain must be exactly what the producer gives back.
  //   two consumers:   256 x (240 - 168) = 128 x (168 - 24)
  //   three consumers: 384 x (160 - 128) = 128 x (128 - 32)
  // The consumers hold O (hdim/2 fp32), S and the next S (block_n/2 each) and P.
  // At 32 with two consumers the increase never completed (the varlen
  // producer hung on the H200: 128 x 136 < 256 x 72).
  static constexpr int kProducerRegisters = kConsumerWarpgroups == 2 ? 24 : 32;
  static constexpr int kConsumerRegisters = kConsumerWarpgroups == 2 ? 240 : 160;

  // Q and K tiles are K-major (head_dim contiguous) with the 128-byte swizzle;
  // V is stored as V^T (head_dim x keys), MN-major, which is how it sits in
  // memory, so the PV GEMM reads it with wgmma's transposed-B mode.
  using SmemLayoutQ = decltype(cute::tile_to_shape(cute::GMMA::Layout_K_SW128_Atom<Element>{},
                                                   cute::Shape<cute::Int<kBlockM>, cute::Int<kHeadDim>>{}));
  using SmemLayoutK = decltype(cute::tile_to_shape(
      cute::GMMA::Layout_K_SW128_Atom<Element>{},
      cute::Shape<cute::Int<kBlockN>, cute::Int<kHeadDim>, cute::Int<kStages>>{}));
  // Atoms of V^T are tiled along the keys first, so a stage is head_dim / 64
  // TMA boxes of 64 x block_n instead of one box per 8 keys.
  using SmemLayoutVt = decltype(cute::tile_to_shape(
      cute::GMMA::Layout_MN_SW128_Atom<Element>{},
      cute::Shape<cute::Int<kHeadDim>, cute::Int<kBlockN>, cute::Int<kStages>>{}, cute::Step<cute::_2, cute::_1, cute::_3>{}));

  // S = Q K^T: both operands from shared memory. O += P V: P from registers
  // (the softmax output never touches shared memory), V^T from shared memory.
  using WarpgroupLayout = cute::Layout<cute::Shape<cute::Int<kConsumerWarpgroups>, cute::_1, cute::_1>>;
  using TiledMmaQK = decltype(cute::make_tiled_mma(
      cute::GMMA::ss_op_selector<Element, Element, float, cute::Shape<cute::_64, cute::Int<kBlockN>, cute::Int<kHeadDim>>>(),
      WarpgroupLayout{}));
  using TiledMmaPV = decltype(cute::make_tiled_mma(
      cute::GMMA::rs_op_selector<Element, Element, float, cute::Shape<cute::_64, cute::Int<kHeadDim>, cute::Int<kBlockN>>,
                                 cute::GMMA::Major::K, cute::GMMA::Major::MN>(),
      WarpgroupLayout{}));

  // O leaves through shared memory and a TMA store per consumer warpgroup
  // (its 64 rows) where the buffer fits: hdim 64 and 128 (+24 / +32 KB);
  // hdim 256 (Q + 2 x (K + V) = 224 KB) stores from the registers, and so
  // do a varlen sequence's last partial 64 rows and the ScoreMods tall
  // tile's varlen kernel (fwd_epilogue_sm90.hpp).
  // The register epilogue cost each consumer warp ~370 instructions per tile
  // (ncu, H200, hdim 128 full 4 x 4k: 1114 against FlashAttention-4's 747
  // with a TMA store), a fifth of a 512-row tile's.
  static constexpr bool kStoreOByTma = kHeadDim <= 128;
  // hdim 128 / 256: a key tile's row maxima and exp2 arguments run under the
  // warpgroup's own O += P V, which it waits for only after them
  // (FlashAttention-4's place), O is rescaled only when a row's maximum
  // moved, and whether a key tile needs the mask is a range test
  // (fwd_mainloop_sm90.hpp). H200, settled peers harness, two rounds
  // (docs/perf_log.md, 2026-12-05): hdim 128 full / causal 16k +4.0 / +3.4%,
  // full 2k +1.7%, hdim 256 4k +1.4-2.1%, hdim 128 causal 512 / 1k -1.6 /
  // -1.4%. hdim 64 lost 10% with it on causal 512 / 1k (the 128-row tile)
  // and keeps the wait before its softmax.
  static constexpr bool kSoftmaxUnderPv = kHeadDim >= 128;
  using SmemLayoutOWarpgroup = decltype(cute::tile_to_shape(cute::GMMA::Layout_K_SW128_Atom<Element>{},
                                                            cute::Shape<cute::_64, cute::Int<kHeadDim>>{}));
  // The whole tile, each warpgroup's 64 rows one contiguous block.
  using SmemLayoutO =
      decltype(cute::tile_to_shape(SmemLayoutOWarpgroup{}, cute::Shape<cute::Int<kBlockM>, cute::Int<kHeadDim>>{}));

  using PipelineQ = cutlass::PipelineTmaAsync<1>;
  using PipelineKV = cutlass::PipelineTmaAsync<kStages>;

  // HandOff: what the producer passes the consumers per tile (the tile index,
  // or a varlen batch's decoded tile).
  template <class HandOff>
  struct SharedStorageFor {
    cute::array_aligned<Element, cute::cosize_v<SmemLayoutQ>, 1024> q;
    cute::array_aligned<Element, cute::cosize_v<SmemLayoutK>, 1024> k;
    cute::array_aligned<Element, cute::cosize_v<SmemLayoutVt>, 1024> v;
    cute::array_aligned<Element, kStoreOByTma ? cute::cosize_v<SmemLayoutO> : 1, 1024> o;
    typename PipelineQ::SharedStorage pipeline_q;
    typename PipelineKV::SharedStorage pipeline_k;
    typename PipelineKV::SharedStorage pipeline_v;
    // The next tile, handed from the producer to the consumers: tile_full
    // completes when it is written, tile_empty when all consumer threads have
    // read it.
    HandOff next_tile;
    cutlass::arch::ClusterBarrier::ValueType tile_full;
    cutlass::arch::ClusterBarrier::ValueType tile_empty;
  };

  static constexpr uint32_t kQBytes = kBlockM * kHeadDim * sizeof(Element);
  static constexpr uint32_t kKVBytes = kBlockN * kHeadDim * sizeof(Element);
};

// Named barriers of the consumer warpgroups: hardware IDs 8 and 9, past the
// 1..7 CUTLASS reserves for its own components (the IDs these barriers had
// when they went through cutlass::arch::NamedBarrier).
// Consumer warpgroup w waits on kMmaTurn0 + w; the one before it arrives there.
enum class FwdBarrier : uint32_t {
  kMmaTurn0 = 8,  // consumer warpgroup 0 may issue its GEMMs
  kMmaTurn1 = 9,  // consumer warpgroup 1 may issue its GEMMs
  kMmaTurn2 = 10,  // consumer warpgroup 2 (192-row tiles) may issue its GEMMs
  kEpilogue0 = 11,  // consumer warpgroup w's O staged for its TMA store (kEpilogue0 + w)
};

}  // namespace dash_attn::sm90::fwd
