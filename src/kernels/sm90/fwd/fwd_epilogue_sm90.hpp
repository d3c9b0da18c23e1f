// Forward epilogue: O = acc / rowsum in the input type and the natural-log
// LSE. Where the staging buffer fits (Traits::kStoreOByTma: hdim 64/128) each
// consumer warpgroup stages its 64 rows of O in shared memory and one of its
// threads stores them by TMA: at equal lengths always (TMA drops the rows
// beyond seqlen_q), in a varlen batch when the 64 rows lie wholly inside the
// sequence (past its end they would land in the next sequence's rows), except
// on the ScoreMods tall tile. Otherwise (hdim 256, a varlen sequence's last
// rows, that tile's varlen kernel) O goes straight from the registers, each quad of
// threads writing whole 32-byte sectors of a row and rows beyond the sequence
// simply not stored. The LSE always goes from the registers.
#pragma once

#include <cute/tensor.hpp>
#include <cute/atom/copy_traits_sm90.hpp>
#include <cute/atom/copy_traits_sm90_tma.hpp>
#include <cutlass/array.h>

#include "dash_attn/schedule/forward_tiles.hpp"
#include "dash_attn/schedule/varlen_forward_tiles.hpp"
#include "dash_attn/types.hpp"
#include "fwd_mainloop_sm90.hpp"
#include "fwd_softmax_sm90.hpp"
#include "fwd_traits_sm90.hpp"
#include "kernels/sm90/common/sync_sm90.hpp"
#include "kernels/sm90/common/wgmma_sm90.hpp"

namespace dash_attn::sm90::fwd {

template <class Traits>
struct FwdEpilogueSm90 {
  using Element = typename Traits::Element;

  // out as TMA sees it: (seq, dim, head, batch), the mainloop's layout of Q.
  using GmemShape = typename FwdMainloopSm90<Traits>::GmemShape;
  using GmemStride = typename FwdMainloopSm90<Traits>::GmemStrideQK;
  using TileO = cute::Shape<cute::_64, cute::Int<Traits::kHeadDim>>;
  static auto make_tma_o(Element* ptr, GmemShape shape, GmemStride stride) {
    auto tensor = cute::make_tensor(cute::make_gmem_ptr(ptr), cute::make_layout(shape, stride));
    return cute::make_tma_copy(cute::SM90_TMA_STORE{}, tensor, typename Traits::SmemLayoutOWarpgroup{}, TileO{},
                               cute::_1{});
  }
  using TmaO = decltype(make_tma_o(nullptr, GmemShape{}, GmemStride{}));

  struct Params {
    Element* out;
    int64_t out_batch_stride, out_seq_stride, out_head_stride;
    float* lse;
    int64_t lse_batch_stride, lse_head_stride;
    const float* sinks;  // heads_q logits or null
    TmaO tma_o;          // kStoreOByTma
    GmemShape shape_o;
  };

  static Params to_params(ForwardArgs const& a) {
    ProblemShape const& s = a.shape;
    const GmemShape shape{int32_t(s.seqlen_q), int32_t(s.head_dim), int32_t(s.heads_q), int32_t(s.batch)};
    const GmemStride stride = FwdMainloopSm90<Traits>::row_strides(a.out, s.seqlen_q, s.heads_q, s.batch);
    Element* out = static_cast<Element*>(a.out.data);
    return Params{out, a.out.batch_stride, a.out.seq_stride, a.out.head_stride, a.lse.data, a.lse.batch_stride,
                  a.lse.head_stride, a.sinks, make_tma_o(out, shape, stride), shape};
  }

  // Whether consumer warpgroup `warpgroup` may store its 64 rows by TMA
  // (given Traits::kStoreOByTma): at equal lengths always, in a varlen batch
  // when no row lies past the sequence. Not the ScoreMods tall tile's varlen
  // kernel: with both stores its consumers (160 registers) spilled 56 / 76 B
  // more and the Plain one read 2-5% slower than with register stores alone
  // (hdim 64, H200, 2026-12-03, docs/perf_log.md); with the vote below the
  // Plain one compiles both without a spill.
  static CUTE_DEVICE bool tma_may_store(schedule::ForwardWorkTile const&, int, int) { return true; }
  // Every lane of a warp has the same answer. In the Plain kernels it is
  // asked as a vote, so that ptxas knows: as a per-thread condition the
  // branch on it made ptxas keep the whole key loop's pipeline state and
  // wgmma descriptors in vector registers (an R2UR pair before each wgmma,
  // mbarrier waits inside convergence barriers): hdim 128 718 -> 688 SASS
  // instructions in the loop, hdim 64 653 -> 632, the fixed-length kernel's
  // form. Not in the ScoreMods kernels: there ptxas then reloaded five
  // spilled register pairs in every step (hdim 128).
  static CUTE_DEVICE bool tma_may_store(schedule::VarlenForwardWork const& work, int warpgroup, int seqlen_q) {
    const bool inside = work.m_block * Traits::kBlockM + (warpgroup + 1) * 64 <= seqlen_q;
    if constexpr (Traits::kScoreMods) return Traits::kConsumerWarpgroups != 3 && inside;
    return __all_sync(0xffffffffu, inside);
  }

  static CUTE_DEVICE void prefetch_descriptor(Params const& p) {
    if constexpr (Traits::kStoreOByTma) cute::prefetch_tma_descriptor(p.tma_o.get_tma_descriptor());
  }

  // Before the CTA exits: this warpgroup's last TMA store has read the buffer.
  static CUTE_DEVICE void finish(int thread_idx) {
    if constexpr (Traits::kStoreOByTma)
      if (thread_idx % 128 == 0) cute::tma_store_wait<0>();
  }

  // Where the tile's (batch, head) rows start in out and lse; in a varlen
  // batch its sequence's rows of the packed tensors.
  static CUTE_DEVICE Element* out_origin(Params const& p, schedule::ForwardWorkTile const& work) {
    return p.out + work.batch * p.out_batch_stride + work.head * p.out_head_stride;
  }
  static CUTE_DEVICE float* lse_origin(Params const& p, schedule::ForwardWorkTile const& work) {
    return p.lse + work.batch * p.lse_batch_stride + work.head * p.lse_head_stride;
  }
  static CUTE_DEVICE Element* out_origin(Params const& p, schedule::VarlenForwardWork const& work) {
    return p.out + work.q_offset * p.out_seq_stride + work.head * p.out_head_stride;
  }
  static CUTE_DEVICE float* lse_origin(Params const& p, schedule::VarlenForwardWork const& work) {
    return p.lse + work.head * p.lse_head_stride + work.q_offset;
  }

  // Masks: as in the mainloop (its mask_geometry() has the rows' seqlen_q).
  // smem_o: the staging buffer (Traits::SmemLayoutO), kStoreOByTma only.
  template <class Masks, class Work, class FragO, class Softmax>
  static CUTE_DEVICE void store(Params const& p, Masks const& masks, int thread_idx, Work const& work, FragO& tOrO,
                                Softmax& softmax, Element* smem_o) {
    using namespace cute;
    constexpr int kRows = Softmax::kRowsPerThread;
    float inverse_sum[kRows], lse[kRows];
    // Sinks in every kernel (plain ones too): one branch per tile.
    if (p.sinks != nullptr)
      finalize_with_sink(softmax, p.sinks[work.head], inverse_sum, lse);
    else
      softmax.finalize(inverse_sum, lse);
    typename Traits::TiledMmaPV mma_pv;
    Tensor tOcO = mma_pv.get_thread_slice(thread_idx)
                      .partition_C(make_identity_tensor(Shape<Int<Traits::kBlockM>, Int<Traits::kHeadDim>>{}));
    auto o = rows_cols_view(tOrO);
    auto coords = rows_cols_view(tOcO);
    float* lse_out = lse_origin(p, work);
    const int seqlen_q = masks.mask_geometry().seqlen_q;
    if constexpr (Traits::kStoreOByTma) {
      if (tma_may_store(work, thread_idx / 128, seqlen_q)) {
        CUTE_UNROLL
        for (int r = 0; r < kRows; ++r) {
          CUTE_UNROLL
          for (int j = 0; j < size<1>(o); ++j) o(r, j) *= inverse_sum[r];
          const int row = work.m_block * Traits::kBlockM + get<0>(coords(r, 0));
          if (row < seqlen_q && thread_idx % 4 == 0) lse_out[row] = lse[r];
        }
        store_by_tma(p, thread_idx, work, tOrO, smem_o);
        return;
      }
    }
    Element* out = out_origin(p, work);
    CUTE_UNROLL
    for (int r = 0; r < kRows; ++r) {
      const int row = work.m_block * Traits::kBlockM + get<0>(coords(r, 0));
      if (row >= seqlen_q) continue;
      Element* out_row = out + row * p.out_seq_stride;
      // Columns j and j + 1 of the view are adjacent in memory: one 4-byte store.
      CUTE_UNROLL
      for (int j = 0; j < size<1>(o); j += 2) {
        cutlass::Array<Element, 2> pair;
        pair[0] = static_cast<Element>(o(r, j) * inverse_sum[r]);
        pair[1] = static_cast<Element>(o(r, j + 1) * inverse_sum[r]);
        *reinterpret_cast<cutlass::Array<Element, 2>*>(out_row + get<1>(coords(r, j))) = pair;
      }
      if (thread_idx % 4 == 0) lse_out[row] = lse[r];
    }
  }

 private:
  // The warpgroup's 64 rows of the scaled O: stmatrix into its block of the
  // staging buffer once its previous store has read it, then one TMA store
  // from its first thread, awaited only before the next one (or the exit).
  template <class Work, class FragO>
  static CUTE_DEVICE void store_by_tma(Params const& p, int thread_idx, Work const& work, FragO const& tOrO,
                                       Element* smem_o) {
    using namespace cute;
    const int warpgroup = thread_idx / 128;
    const bool issuer = thread_idx % 128 == 0;
    const uint32_t barrier = static_cast<uint32_t>(FwdBarrier::kEpilogue0) + warpgroup;
    if (issuer) tma_store_wait<0>();
    named_barrier_sync(barrier, 128);
    typename Traits::TiledMmaPV mma_pv;
    Tensor sO = make_tensor(make_smem_ptr(smem_o), typename Traits::SmemLayoutO{});
    auto r2s = make_tiled_copy_C(Copy_Atom<SM90_U32x4_STSM_N, Element>{}, mma_pv);
    auto thr_r2s = r2s.get_thread_slice(thread_idx);
    Tensor converted = convert_fragment<Element>(tOrO);
    copy(r2s, thr_r2s.retile_S(converted), thr_r2s.partition_D(sO));
    fence_proxy_async_shared();
    named_barrier_sync(barrier, 128);
    if (issuer) {
      Tensor mO = p.tma_o.get_tma_tensor(p.shape_o);
      using Mainloop = FwdMainloopSm90<Traits>;
      Tensor gO = local_tile(Mainloop::rows_of(mO, work.head, Mainloop::q_rows(work)), TileO{},
                             make_coord(work.m_block * Traits::kConsumerWarpgroups + warpgroup, 0));
      Tensor sOw = make_tensor(make_smem_ptr(smem_o + warpgroup * cosize_v<typename Traits::SmemLayoutOWarpgroup>),
                               typename Traits::SmemLayoutOWarpgroup{});
      auto [tma_g, tma_s] = tma_partition(p.tma_o, Int<0>{}, Layout<_1>{}, group_modes<0, 2>(sOw), group_modes<0, 2>(gO));
      copy(p.tma_o, tma_s, tma_g);
      tma_store_arrive();
    }
  }
};

}  // namespace dash_attn::sm90::fwd
