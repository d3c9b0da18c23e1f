// Compile-time configuration of the sm90 backward main kernel for one
// (element type, head_dim): tiles, warp roles, shared-memory layouts, the
// four wgmma tilings and the shared storage.
//
// Orientation (all per KV tile of kBlockN keys, per Q tile of kBlockM rows):
//   S^T  = K Q^T     (kBlockN x kBlockM)  SS; the two MMA warpgroups split the keys
//   dP^T = V dO^T    (kBlockN x kBlockM)  SS; same split, so P^T and dS^T stay in
//                                         the registers of the warpgroup that owns the keys
//   dV  += P^T dO    (kBlockN x d)        RS: P^T from registers
//   dK  += dS^T Q    (kBlockN x d)        RS: dS^T from registers
//   dQ   = dS K      (kBlockM x d)        SS: dS through shared memory (both halves of the keys)
//
// head_dim 256 (kSplitHeadDim): dK and dV of a 64-key tile already take 128
// registers per MMA thread and 64 keys cannot be split (wgmma M is 64), so
// the warpgroups split the Q rows of S^T, dP^T (n32 wgmmas) and head_dim of
// dV, dK, dQ; P^T joins dS^T in shared memory and dV, dK become SS GEMMs over
// all Q rows. There is no room for a separate 64 KB dQ stage next to two Q/dO
// stages, so once a step's GEMMs have read its Q and dO, the partial dQ tile
// is written over them (kDqInQStage) and the stage goes back to the producer
// after the dQ writer's bulk add has read it.
#pragma once

#include <type_traits>

#include <cute/tensor.hpp>
#include <cute/atom/mma_traits_sm90_gmma.hpp>
#include <cute/atom/copy_traits_sm90_tma.hpp>
#include <cute/atom/copy_traits_sm90.hpp>
#include <cutlass/arch/barrier.h>

#include "bwd_row_stats.hpp"
#include "bwd_work_sm90.hpp"
#include "dash_attn/tile_config.hpp"

namespace dash_attn::sm90::bwd {

using namespace cute;

// kScoreMods_: the kernel honours sliding windows (left bounds in the
// element mask; sinks need no kernel code, the forward's LSE carries them);
// the ScoreMods rows of the kernel table, each of which compiles two
// kernels: kSoftcap_ adds the softcap (dS gains 1 - tanh^2, a fragment as
// large as S held across the dP GEMM). A run-time switch instead kept that
// fragment in the register allocation of every ScoreMods call: spills at
// hdim 64 went 628 -> 1544 B stored (ptxas), 972 B without the softcap code.
template <class Element_, int kHeadDim_, bool kScoreMods_ = false, bool kSoftcap_ = false>
struct BwdTraits {
  using Element = Element_;  // cutlass::bfloat16_t or cutlass::half_t
  static constexpr int kHeadDim = kHeadDim_;
  static constexpr bool kScoreMods = kScoreMods_;
  static constexpr bool kSoftcap = kSoftcap_;
  static_assert(kScoreMods || !kSoftcap, "the softcap is a score mod");
  static constexpr bool kLseInAccumulator = lse_in_accumulator(kHeadDim, kSoftcap);
  static constexpr int kBlockM = backward_tile(kHeadDim).block_m;
  static constexpr int kBlockN = backward_tile(kHeadDim).block_n;
  static constexpr bool kSplitHeadDim = kBlockN == 64;
  static_assert(kBlockN == 128 || (kSplitHeadDim && kBlockM == 64),
                "two MMA warpgroups split the KV tile in halves of 64 keys, or the Q rows and head_dim");

  // Warp roles: warpgroup 0 = producer warp (TMA) + one dQ writer warp per dQ
  // stage + 1 idle warp; warpgroups 1-2 = MMA. setmaxnreg moves registers inside the CTA's
  // launch allocation, 384 threads x 168 (the __launch_bounds__ cap): the MMA
  // warpgroups can only grow to 240 if warpgroup 0 shrinks to 24
  // (128 x 24 + 256 x 240 = 384 x 168); asking for more blocks forever.
  // hdim 256 gives warpgroup 0 56 and the MMA warpgroups 224 (128 x 56 +
  // 256 x 224; per step its producer moves twice hdim 128's Q/dO bytes):
  // ptxas spills 824 -> 352 B at 40 / 232, 36 B at 56 / 224, the MMA loop's
  // unchanged; H200 A/B, 2 rounds each (docs/perf_log.md, 2026-12-04):
  // 40 / 232 +1-5% on all 6 hdim 256 rows, 56 / 224 +1-4.5% more on 5 of
  // them. 40 / 232 cost hdim 128 full 8k 6% and moved hdim 64 by -1..+2%,
  // so those keep 24 / 240.
  static constexpr int kMmaWarpgroups = 2;
  static constexpr int kMmaThreads = kMmaWarpgroups * 128;
  static constexpr int kThreads = kMmaThreads + 128;
  static constexpr int kProducerRegisters = kHeadDim > 128 ? 56 : 24;
  static constexpr int kMmaRegisters = kHeadDim > 128 ? 224 : 240;
  static constexpr int kLaunchRegisters = 65536 / kThreads / 8 * 8;
  static_assert(128 * kProducerRegisters + kMmaThreads * kMmaRegisters <= kThreads * kLaunchRegisters,
                "setmaxnreg must stay within the CTA's register allocation");
  static constexpr int kStages = 2;     // Q and dO pipeline depth
  static constexpr int kDsStages = 2;   // lets one warpgroup write dS(j+1) while the other still reads dS(j)
  static constexpr int kDqStages = kBackwardDqStages;  // the MMA runs a tile ahead of the ordered dQ reduction
  // The partial dQ tile (fp32, 64 x 256 = Q + dO of one stage in bf16) goes into
  // the Q/dO stage it was computed from: its first half over Q, the second over dO.
  static constexpr bool kDqInQStage = kSplitHeadDim;
  // dS^T stages, followed by as many P^T stages when P^T goes through shared memory.
  static constexpr int kDsBuffers = kSplitHeadDim ? 2 : 1;
  // How the epilogue takes an MHA chain's dK and dV out of shared memory:
  //  - hdim 64 (kDkvInOneDsStage): both fit in one dS stage; staged in the
  //    stage the chain's last step used and stored by TMA while the next
  //    chain starts;
  //  - hdim 128: one after the other over both dS stages, each stored by TMA;
  //    the dV store runs on into the next chain, which waits for its read
  //    before its first step (+6-11% at 512-1k over two rounds of 16-byte
  //    stores, ~0 from 4k; waiting inside the step loop instead cost 2-7%
  //    from 2k; H200, 2026-12-01);
  //  - hdim 256 (kDkvStagedInKv): both at once in the chain's K and V buffers
  //    (the dS buffers hold one of them), which go back to the producer only
  //    after the epilogue has read them (one round instead of two: +1-15%,
  //    most at 512-2k), written back with 16-byte stores.
  static constexpr bool kDkvInOneDsStage = 2 * kBlockN * kHeadDim <= kBlockM * kBlockN;
  static constexpr bool kDkvStagedInKv = kSplitHeadDim;
  static constexpr bool kDkvTmaStore = !kDkvStagedInKv;
  // A step's partial dQ goes to the dQ stage with its Q/dO stage's index, so
  // the producer, which fills the Q/dO stages, also tells each dQ writer what
  // its stage's next tile is.
  static_assert(kDqStages == kStages, "one dQ stage (and writer warp) per Q/dO stage");

  using TileShapeMNK = Shape<Int<kBlockM>, Int<kBlockN>, Int<kHeadDim>>;

  // A head's tiles with this kernel's tile sizes as constants (the host
  // builds them with the same ones, checked at launch): the band's divisions
  // by block_m and block_n, asked per step by every role, become shifts.
  static CUTE_HOST_DEVICE schedule::HeadTiles compiled_tiles(schedule::HeadTiles tiles) {
    tiles.block_m = kBlockM;
    tiles.block_n = kBlockN;
    return tiles;
  }

  // Shared memory. Q, dO, K, V: K-major (head_dim contiguous), as TMA writes them.
  using SmemAtomRow = GMMA::Layout_K_SW128_Atom<Element>;
  using SmemLayoutQ = decltype(tile_to_shape(SmemAtomRow{}, Shape<Int<kBlockM>, Int<kHeadDim>, Int<kStages>>{}));
  using SmemLayoutQStage = decltype(tile_to_shape(SmemAtomRow{}, Shape<Int<kBlockM>, Int<kHeadDim>>{}));
  using SmemLayoutK = decltype(tile_to_shape(SmemAtomRow{}, Shape<Int<kBlockN>, Int<kHeadDim>>{}));
  // Transposed views (d, rows): the same bytes as MN-major B operands.
  using SmemLayoutQt = decltype(composition(
      SmemLayoutQ{}, make_layout(Shape<Int<kHeadDim>, Int<kBlockM>, Int<kStages>>{},
                                 Stride<Int<kBlockM>, _1, Int<kBlockM * kHeadDim>>{})));
  using SmemLayoutKt = decltype(composition(
      SmemLayoutK{}, make_layout(Shape<Int<kHeadDim>, Int<kBlockN>>{}, Stride<Int<kBlockN>, _1>{})));
  // dS (kBlockM x kBlockN), M-major: the A operand of dQ = dS K; written through
  // its transposed view (kBlockN x kBlockM), which is how dS^T sits in registers.
  using SmemLayoutDs = decltype(tile_to_shape(GMMA::Layout_MN_SW128_Atom<Element>{},
                                              Shape<Int<kBlockM>, Int<kBlockN>, Int<kDsStages>>{}));
  using SmemLayoutDst = decltype(composition(
      SmemLayoutDs{}, make_layout(Shape<Int<kBlockN>, Int<kBlockM>, Int<kDsStages>>{},
                                  Stride<Int<kBlockM>, _1, Int<kBlockM * kBlockN>>{})));

  // Accumulator fragments -> shared memory with stmatrix, 8 consecutive
  // elements of a fragment row contiguous: dS^T into the M-major dS layout
  // (Q rows contiguous), dK/dV into K's layout (head_dim contiguous).
  using SmemCopyAtomAcc = Copy_Atom<SM90_U32x4_STSM_N, Element>;

  // wgmma tilings over the 256 MMA threads: the warpgroups split the keys
  // (M), or with kSplitHeadDim the Q rows of S^T, dP^T and head_dim of dK, dV (N).
  static constexpr int kKeyGroups = kSplitHeadDim ? 1 : 2;
  static constexpr int kColumnGroups = 2 / kKeyGroups;
  using MmaGroups = Layout<Shape<Int<kKeyGroups>, Int<kColumnGroups>, _1>>;
  using TiledMmaSdP = decltype(make_tiled_mma(
      GMMA::ss_op_selector<Element, Element, float, Shape<_64, Int<kBlockM / kColumnGroups>, Int<kHeadDim>>>(),
      MmaGroups{}));
  // dV, dK: P^T, dS^T as register A operands, or (kSplitHeadDim) from shared memory, K-major.
  using MmaDkvShape = Shape<_64, Int<kHeadDim / kColumnGroups>, Int<kBlockM>>;
  using MmaDkvAtom = std::conditional_t<
      kSplitHeadDim, decltype(GMMA::ss_op_selector<Element, Element, float, MmaDkvShape, GMMA::Major::K, GMMA::Major::MN>()),
      decltype(GMMA::rs_op_selector<Element, Element, float, MmaDkvShape, GMMA::Major::K, GMMA::Major::MN>())>;
  using TiledMmaDkv = decltype(make_tiled_mma(MmaDkvAtom{}, MmaGroups{}));
  // dQ: 64 rows per warpgroup, split along rows when kBlockM = 128, along head_dim otherwise.
  static constexpr int kDqAtomM = kBlockM == 128 ? 2 : 1;
  static constexpr int kDqAtomN = 2 / kDqAtomM;
  static_assert(kHeadDim / kDqAtomN <= 256 && kBlockM / kDqAtomM == 64, "dQ tiling");
  using TiledMmaDq = decltype(make_tiled_mma(
      GMMA::ss_op_selector<Element, Element, float, Shape<_64, Int<kHeadDim / kDqAtomN>, Int<kBlockN>>,
                           GMMA::Major::MN, GMMA::Major::MN>(),
      Layout<Shape<Int<kDqAtomM>, Int<kDqAtomN>, _1>>{}));

  static constexpr int kDqTileFloats = kBlockM * kHeadDim;
  static constexpr uint32_t kQBytes = kBlockM * kHeadDim * sizeof(Element);
  static constexpr uint32_t kKBytes = kBlockN * kHeadDim * sizeof(Element);
  static constexpr uint32_t kRowStatBytes = kBlockM * sizeof(float);

  struct SharedStorage {
    alignas(1024) Element q[cosize_v<SmemLayoutQ>];
    alignas(1024) Element dout[cosize_v<SmemLayoutQ>];
    alignas(1024) Element k[cosize_v<SmemLayoutK>];
    alignas(1024) Element v[cosize_v<SmemLayoutK>];
    alignas(1024) Element ds[kDsBuffers * cosize_v<SmemLayoutDs>];
    // Unused with kDqInQStage (dq_over_stage).
    alignas(128) std::conditional_t<kDqInQStage, float[1], float[kDqStages][kDqTileFloats]> dq;
    alignas(16) float minus_lse[kStages][kBlockM];  // bwd_row_stats.hpp
    alignas(16) float minus_d[kStages][kBlockM];
    alignas(8) uint64_t q_full[kStages];
    uint64_t q_empty[kStages];
    uint64_t dout_full[kStages];
    uint64_t dout_empty[kStages];
    uint64_t kv_full;
    uint64_t kv_empty;
    // Chains published by the producer, a ring of two: the MMA warpgroups
    // read one while the producer fills the other.
    ChainWork chains[2];
    uint64_t chain_full[2];
    uint64_t chain_empty[2];
    // Per dQ stage, two task slots (alternating with the stage's uses), so
    // the producer may publish a use while the writer still works on the
    // previous one.
    DqTask dq_tasks[kDqStages][2];
    uint64_t dq_task_full[kDqStages][2];
    uint64_t dq_task_empty[kDqStages][2];
    int dq_tasks_done;  // adds completed by both writers, for the wave schedules' drain before a claim

    // kDqInQStage: floats [half * kDqTileFloats / 2, (half + 1) * kDqTileFloats / 2)
    // of a stage's partial dQ tile (in the fragment order of bwd_dq_layout.hpp)
    // lie over that stage's Q (half 0) or dO (half 1).
    __device__ float* dq_over_stage(int stage, int half) {
      static_assert(kDqInQStage);
      return reinterpret_cast<float*>((half == 0 ? q : dout) + stage * kBlockM * kHeadDim);
    }
  };
  static constexpr int kSmemBytes = sizeof(SharedStorage);
  static_assert(kSmemBytes <= 227 * 1024, "shared storage exceeds the 227 KB per block of sm90");
};

}  // namespace dash_attn::sm90::bwd
