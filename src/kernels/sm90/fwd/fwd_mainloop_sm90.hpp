// Forward mainloop: the producer's TMA loads of Q, K, V and the consumers'
// GEMMs with the online softmax between them.
//
// Per query tile the consumers walk key tiles from the last (the ones the
// causal mask cuts) to the first, with FlashAttention-3's intra-warpgroup
// overlap: while the softmax of S(n) runs on the CUDA cores, the tensor cores
// already compute O += P(n+1) V(n+1), issued together with S(n) = Q K(n)^T.
// Between the consumer warpgroups named barriers pass a turn round robin
// (pingpong): one warpgroup issues its GEMMs while the others run their softmax.
#pragma once

#include <cutlass/arch/barrier.h>
#include <cutlass/numeric_conversion.h>

#include "dash_attn/schedule/forward_tiles.hpp"
#include "dash_attn/schedule/varlen_forward_tiles.hpp"
#include "dash_attn/types.hpp"
#include "fwd_softmax_sm90.hpp"
#include "fwd_traits_sm90.hpp"
#include "kernels/sm90/common/softcap_sm90.hpp"
#include "kernels/sm90/common/sync_sm90.hpp"
#include "kernels/sm90/common/tma_sm90.hpp"
#include "kernels/sm90/common/wgmma_sm90.hpp"
#include "kernels/sm90/launch.hpp"

namespace dash_attn::sm90::fwd {

template <class Traits>
struct FwdMainloopSm90 {
  using Element = typename Traits::Element;
  static constexpr int kBlockM = Traits::kBlockM;
  static constexpr int kBlockN = Traits::kBlockN;
  static constexpr int kHeadDim = Traits::kHeadDim;
  using TileQ = cute::Shape<cute::Int<kBlockM>, cute::Int<kHeadDim>>;
  using TileK = cute::Shape<cute::Int<kBlockN>, cute::Int<kHeadDim>>;
  using TileVt = cute::Shape<cute::Int<kHeadDim>, cute::Int<kBlockN>>;

  // Global tensors as TMA sees them: (seq, dim, head, batch) for Q and K and
  // (dim, seq, head, batch) for V, with the caller's element strides.
  using GmemShape = cute::Shape<int32_t, int32_t, int32_t, int32_t>;
  using GmemStrideQK = cute::Stride<int64_t, cute::_1, int64_t, int64_t>;
  using GmemStrideVt = cute::Stride<cute::_1, int64_t, int64_t, int64_t>;

  template <class Stride, class Tile, class Smem>
  static auto make_tma(Element const* ptr, GmemShape shape, Stride stride, Tile tile, Smem smem) {
    auto tensor = cute::make_tensor(cute::make_gmem_ptr(ptr), cute::make_layout(shape, stride));
    return cute::make_tma_copy(cute::SM90_TMA_LOAD{}, tensor, smem, tile, cute::_1{});
  }
  using TmaQ = decltype(make_tma(nullptr, GmemShape{}, GmemStrideQK{}, TileQ{}, typename Traits::SmemLayoutQ{}));
  using TmaK = decltype(make_tma(nullptr, GmemShape{}, GmemStrideQK{}, TileK{},
                                 typename Traits::SmemLayoutK{}(cute::_, cute::_, cute::Int<0>{})));
  using TmaVt = decltype(make_tma(nullptr, GmemShape{}, GmemStrideVt{}, TileVt{},
                                  typename Traits::SmemLayoutVt{}(cute::_, cute::_, cute::Int<0>{})));

  struct Params {
    TmaQ tma_q;
    TmaK tma_k;
    TmaVt tma_v;
    GmemShape shape_q;   // (seqlen_q, head_dim, heads_q, batch)
    GmemShape shape_kv;  // (seqlen_k, head_dim, heads_kv, batch)
    int q_heads_per_kv;
    // exp2's factor on the scores: softmax_scale * log2(e), or with a softcap
    // softcap * log2(e) on the capped scores tanh(q.k * softcap_scale).
    float scale_log2;
    float softcap_scale;  // softmax_scale / softcap; 0: no softcap (kScoreMods only)
  };

  // Size-1 dimensions: 8 elements (16 bytes), a stride TMA accepts.
  static constexpr int64_t kUnusedStride = 8;

  // (seq, dim, head, batch) strides of a rows tensor (Q, K, and the epilogue's O).
  static GmemStrideQK row_strides(TensorView const& t, int64_t seqlen, int64_t heads, int64_t batch) {
    return GmemStrideQK{tma_stride(seqlen, t.seq_stride, kUnusedStride), cute::_1{},
                        tma_stride(heads, t.head_stride, kUnusedStride), tma_stride(batch, t.batch_stride, kUnusedStride)};
  }

  static Params to_params(ForwardArgs const& a, ForwardConfig const& config) {
    ProblemShape const& s = a.shape;
    const GmemShape shape_q{int32_t(s.seqlen_q), int32_t(s.head_dim), int32_t(s.heads_q), int32_t(s.batch)};
    const GmemShape shape_kv{int32_t(s.seqlen_k), int32_t(s.head_dim), int32_t(s.heads_kv), int32_t(s.batch)};
    auto stride_qk = [&](TensorView const& t, int64_t seqlen, int64_t heads) { return row_strides(t, seqlen, heads, s.batch); };
    const GmemStrideVt stride_v{cute::_1{}, tma_stride(s.seqlen_k, a.v.seq_stride, kUnusedStride), tma_stride(s.heads_kv, a.v.head_stride, kUnusedStride),
                                tma_stride(s.batch, a.v.batch_stride, kUnusedStride)};
    const GmemShape shape_vt{int32_t(s.head_dim), int32_t(s.seqlen_k), int32_t(s.heads_kv), int32_t(s.batch)};
    return Params{
        make_tma(static_cast<Element const*>(a.q.data), shape_q, stride_qk(a.q, s.seqlen_q, s.heads_q), TileQ{},
                 typename Traits::SmemLayoutQ{}),
        make_tma(static_cast<Element const*>(a.k.data), shape_kv, stride_qk(a.k, s.seqlen_k, s.heads_kv), TileK{},
                 typename Traits::SmemLayoutK{}(cute::_, cute::_, cute::Int<0>{})),
        make_tma(static_cast<Element const*>(a.v.data), shape_vt, stride_v, TileVt{},
                 typename Traits::SmemLayoutVt{}(cute::_, cute::_, cute::Int<0>{})),
        shape_q,
        shape_kv,
        static_cast<int>(s.heads_q / s.heads_kv),
        (config.softcap > 0.f ? config.softcap : config.softmax_scale) * static_cast<float>(M_LOG2E),
        config.softcap > 0.f ? config.softmax_scale / config.softcap : 0.f};
  }

  static CUTE_DEVICE void prefetch_descriptors(Params const& p) {
    cute::prefetch_tma_descriptor(p.tma_q.get_tma_descriptor());
    cute::prefetch_tma_descriptor(p.tma_k.get_tma_descriptor());
    cute::prefetch_tma_descriptor(p.tma_v.get_tma_descriptor());
  }

  // The (seq, dim) slice of a tile's (batch, head); in a varlen batch the
  // packed tensor (batch 1) from the sequence's first row on. The TMA reads
  // past a sequence's end land in the next sequence or, past the tensor, in
  // zeros: the mask hides those keys and the epilogue drops those rows.
  template <class Tensor>
  static CUTE_DEVICE auto rows_of(Tensor&& m, int head, schedule::ForwardWorkTile const& work) {
    return m(cute::_, cute::_, head, work.batch);
  }
  template <class Tensor>
  static CUTE_DEVICE auto rows_of(Tensor&& m, int head, int first_row) {
    return cute::domain_offset(cute::make_coord(first_row, 0), m(cute::_, cute::_, head, 0));
  }
  // V^T is (dim, seq): the offset goes on its second mode.
  template <class Tensor>
  static CUTE_DEVICE auto columns_of(Tensor&& m, int head, schedule::ForwardWorkTile const& work) {
    return m(cute::_, cute::_, head, work.batch);
  }
  template <class Tensor>
  static CUTE_DEVICE auto columns_of(Tensor&& m, int head, int first_column) {
    return cute::domain_offset(cute::make_coord(0, first_column), m(cute::_, cute::_, head, 0));
  }
  static CUTE_DEVICE schedule::ForwardWorkTile const& q_rows(schedule::ForwardWorkTile const& work) { return work; }
  static CUTE_DEVICE schedule::ForwardWorkTile const& kv_rows(schedule::ForwardWorkTile const& work) { return work; }
  static CUTE_DEVICE int q_rows(schedule::VarlenForwardWork const& work) { return work.q_offset; }
  static CUTE_DEVICE int kv_rows(schedule::VarlenForwardWork const& work) { return work.k_offset; }

  // Producer (one thread): Q once per tile, then K(n), V(n) for n descending
  // over the tile's key tiles [n_block_begin, n_block_end), in the order the
  // consumers release the stages. K and V advance together here, so one
  // pipeline state serves both (the producer has 24 registers).
  // before_last_keys() runs before the wait for the last key tile's stage:
  // the producer's claim of its next tile, so that the claim's round trip
  // to L2 overlaps that wait instead of following the last loads.
  template <class SharedStorage, class StateQ, class StateKV, class Work, class BeforeLastKeys>
  static CUTE_DEVICE void load(Params const& p, SharedStorage& smem, typename Traits::PipelineQ& pipeline_q,
                               typename Traits::PipelineKV& pipeline_k, typename Traits::PipelineKV& pipeline_v,
                               StateQ& state_q, StateKV& state_kv, Work const& work, int n_block_begin,
                               int n_block_end, BeforeLastKeys&& before_last_keys) {
    using namespace cute;
    Tensor sQ = make_tensor(make_smem_ptr(smem.q.data()), typename Traits::SmemLayoutQ{});
    Tensor sK = make_tensor(make_smem_ptr(smem.k.data()), typename Traits::SmemLayoutK{});
    Tensor sVt = make_tensor(make_smem_ptr(smem.v.data()), typename Traits::SmemLayoutVt{});
    const int head_kv = work.head / p.q_heads_per_kv;
    Tensor mQ = p.tma_q.get_tma_tensor(p.shape_q);
    Tensor mK = p.tma_k.get_tma_tensor(p.shape_kv);
    Tensor mVt = p.tma_v.get_tma_tensor(
        make_shape(get<1>(p.shape_kv), get<0>(p.shape_kv), get<2>(p.shape_kv), get<3>(p.shape_kv)));
    Tensor gQ = local_tile(rows_of(mQ, work.head, q_rows(work)), TileQ{}, make_coord(work.m_block, 0));  // (M, D)
    Tensor gK = local_tile(rows_of(mK, head_kv, kv_rows(work)), TileK{}, make_coord(_, 0));              // (N, D, n)
    Tensor gVt = local_tile(columns_of(mVt, head_kv, kv_rows(work)), TileVt{}, make_coord(0, _));        // (D, N, n)
    auto [tQgQ, tQsQ] = tma_partition(p.tma_q, Int<0>{}, Layout<_1>{}, group_modes<0, 2>(sQ), group_modes<0, 2>(gQ));
    auto [tKgK, tKsK] = tma_partition(p.tma_k, Int<0>{}, Layout<_1>{}, group_modes<0, 2>(sK), group_modes<0, 2>(gK));
    auto [tVgV, tVsV] = tma_partition(p.tma_v, Int<0>{}, Layout<_1>{}, group_modes<0, 2>(sVt), group_modes<0, 2>(gVt));

    pipeline_q.producer_acquire(state_q);
    copy(p.tma_q.with(*pipeline_q.producer_get_barrier(state_q)), tQgQ, tQsQ);
    ++state_q;
    // Not unrolled: the copies of the body would not fit in 24 registers.
#pragma unroll 1
    for (int n = n_block_end - 1; n >= n_block_begin; --n) {
      if (n == n_block_begin) before_last_keys();
      pipeline_k.producer_acquire(state_kv);
      copy(p.tma_k.with(*pipeline_k.producer_get_barrier(state_kv)), tKgK(_, n), tKsK(_, state_kv.index()));
      pipeline_v.producer_acquire(state_kv);
      copy(p.tma_v.with(*pipeline_v.producer_get_barrier(state_kv)), tVgV(_, n), tVsV(_, state_kv.index()));
      ++state_kv;
    }
  }

  // Pingpong: wait for this warpgroup's turn to issue GEMMs / hand it to the
  // next one (round robin over the consumer warpgroups). A turn barrier
  // counts the waiting warpgroup and the one arriving: 256 threads. No
  // warpgroup can arrive twice before the next one has waited: its own next
  // turn needs the whole round to pass first.
  static constexpr uint32_t kTurnThreads = 2 * 128;
  static CUTE_DEVICE void wait_turn(int consumer_wg) {
    named_barrier_sync(static_cast<uint32_t>(FwdBarrier::kMmaTurn0) + consumer_wg, kTurnThreads);
  }
  static CUTE_DEVICE void pass_turn(int consumer_wg) {
    const int next = consumer_wg + 1 == Traits::kConsumerWarpgroups ? 0 : consumer_wg + 1;
    named_barrier_arrive(static_cast<uint32_t>(FwdBarrier::kMmaTurn0) + next, kTurnThreads);
  }

  template <class TensorP>
  static CUTE_DEVICE auto to_operand_a(TensorP const& scores) {
    using namespace cute;
    constexpr int kCount = decltype(size(scores))::value;
    Tensor p = make_tensor<Element>(accumulator_as_a_operand(scores.layout()));
    cutlass::NumericArrayConverter<Element, float, kCount> convert;
    *reinterpret_cast<cutlass::Array<Element, kCount>*>(p.data()) =
        convert(*reinterpret_cast<cutlass::Array<float, kCount> const*>(scores.data()));
    return p;
  }

  // Consumer warpgroup: O and the softmax statistics of its 64 rows of the tile.
  // tOrO must be cleared and softmax reset by the caller.
  // Masks: what has the tile's mask_geometry() (the ForwardPlan, or a varlen
  // tile's schedule::VarlenTileMasks); asked where each answer is needed.
  template <class SharedStorage, class StateQ, class StateKV, class Masks, class Work, class FragO, class Softmax>
  static CUTE_DEVICE void mma(Params const& p, Masks const& masks, SharedStorage& smem,
                              typename Traits::PipelineQ& pipeline_q, typename Traits::PipelineKV& pipeline_k,
                              typename Traits::PipelineKV& pipeline_v, StateQ& state_q, StateKV& state_k,
                              StateKV& state_v, int thread_idx, Work const& work, int n_block_begin,
                              int n_block_end, FragO& tOrO, Softmax& softmax) {
    using namespace cute;
    Tensor sQ = make_tensor(make_smem_ptr(smem.q.data()), typename Traits::SmemLayoutQ{});
    Tensor sK = make_tensor(make_smem_ptr(smem.k.data()), typename Traits::SmemLayoutK{});
    Tensor sVt = make_tensor(make_smem_ptr(smem.v.data()), typename Traits::SmemLayoutVt{});
    typename Traits::TiledMmaQK mma_qk;
    typename Traits::TiledMmaPV mma_pv;
    auto thr_qk = mma_qk.get_thread_slice(thread_idx);
    auto thr_pv = mma_pv.get_thread_slice(thread_idx);
    Tensor tSrQ = thr_qk.partition_fragment_A(sQ);
    Tensor tSrK = thr_qk.partition_fragment_B(sK);
    Tensor tOrVt = thr_pv.partition_fragment_B(sVt);
    Tensor tSrS = partition_fragment_C(mma_qk, Shape<Int<kBlockM>, Int<kBlockN>>{});
    Tensor tScS = thr_qk.partition_C(make_identity_tensor(Shape<Int<kBlockM>, Int<kBlockN>>{}));
    const int consumer_wg = thread_idx / 128;
    const int row_offset = work.m_block * kBlockM;
    constexpr int kRows = Softmax::kRowsPerThread;
    float rescale[kRows];

    // kSoftmaxUnderPv: key tiles outside [unmasked_begin, unmasked_end) need the element mask.
    const int unmasked_begin = masks.mask_geometry().unmasked_kv_begin(work.m_block);
    const int unmasked_end = masks.mask_geometry().unmasked_kv_end(work.m_block);
    // The softcap (before the mask: a hidden score is -inf whatever its cap)
    // and the mask, on S(n) straight out of its GEMM.
    auto mask_if_needed = [&](int n) {
      if constexpr (Traits::kScoreMods)
        if (p.softcap_scale != 0.f) {
          CUTE_UNROLL
          for (int i = 0; i < size(tSrS); ++i) tSrS(i) = softcap_tanh(tSrS(i) * p.softcap_scale);
        }
      if constexpr (Traits::kSoftmaxUnderPv) {
        // __builtin_expect keeps the mask a branch: without it ptxas
        // predicated the whole mask into every step (517 -> 674 instructions).
        if (__builtin_expect(n < unmasked_begin || n >= unmasked_end, 0))
          apply_mask<Traits::kScoreMods>(tSrS, tScS, row_offset, n * kBlockN, masks.mask_geometry());
      } else if (masks.mask_geometry().tile_needs_mask(work.m_block, n)) {
        apply_mask<Traits::kScoreMods>(tSrS, tScS, row_offset, n * kBlockN, masks.mask_geometry());
      }
    };

    int n = n_block_end - 1;
    pipeline_q.consumer_wait(state_q);
    pipeline_k.consumer_wait(state_k);
    wait_turn(consumer_wg);
    wgmma_gemm<true>(mma_qk, tSrQ, tSrK(_, _, _, state_k.index()), tSrS);
    pass_turn(consumer_wg);
    warpgroup_wait<0>();
    pipeline_k.consumer_release(state_k);
    ++state_k;
    if (n == n_block_begin) pipeline_q.consumer_release(state_q);
    mask_if_needed(n);
    if constexpr (Traits::kSoftmaxUnderPv) {
      softmax.update_maxima(tSrS, rescale);
      softmax.exponentiate(tSrS, rescale);
    } else {
      softmax.update(tSrS, rescale);
    }
    auto tOrP = to_operand_a(tSrS);

    for (--n; n >= n_block_begin; --n) {
      pipeline_k.consumer_wait(state_k);
      wait_turn(consumer_wg);
      wgmma_gemm<true>(mma_qk, tSrQ, tSrK(_, _, _, state_k.index()), tSrS);
      pipeline_v.consumer_wait(state_v);
      wgmma_gemm<false>(mma_pv, tOrP, tOrVt(_, _, _, state_v.index()), tOrO);
      pass_turn(consumer_wg);
      warpgroup_wait<1>();  // S(n) is ready; O += P V may still run
      pipeline_k.consumer_release(state_k);
      ++state_k;
      if (n == n_block_begin) pipeline_q.consumer_release(state_q);
      mask_if_needed(n);
      if constexpr (Traits::kSoftmaxUnderPv) {
        // The row maxima and exponent arguments run under this warpgroup's
        // O += P V; the warp-uniform branch ends ptxas's block there, so the
        // wait below stays after them (without it ptxas hoists the wait above
        // the softmax to interleave P's conversion with the exponentials).
        softmax.update_maxima(tSrS, rescale);
        // O is rescaled only when a row of the warp has a new maximum (the
        // factors are then exactly 1 otherwise).
        if (any_row_rescaled(rescale)) {
          warpgroup_wait<0>();
          scale_rows(tOrO, rescale);
        }
        warpgroup_wait<0>();
        pipeline_v.consumer_release(state_v);
        ++state_v;
        softmax.exponentiate(tSrS, rescale);
      } else {
        softmax.update(tSrS, rescale);
        warpgroup_wait<0>();
        pipeline_v.consumer_release(state_v);
        ++state_v;
        scale_rows(tOrO, rescale);
      }
      tOrP = to_operand_a(tSrS);
    }

    pipeline_v.consumer_wait(state_v);
    wgmma_gemm<false>(mma_pv, tOrP, tOrVt(_, _, _, state_v.index()), tOrO);
    warpgroup_wait<0>();
    pipeline_v.consumer_release(state_v);
    ++state_v;
    ++state_q;
  }
};

}  // namespace dash_attn::sm90::fwd
