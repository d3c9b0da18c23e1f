// The MMA warpgroups' work on one chain: for every Q tile in the chain's
// order, recompute P^T, form dS^T, accumulate dV and dK in registers and hand
// the partial dQ tile to the dQ writer through shared memory.
#pragma once

#include <cmath>

#include <cutlass/pipeline/pipeline.hpp>

#include "bwd_params_sm90.hpp"
#include "bwd_barriers_sm90.hpp"
#include "kernels/sm90/common/sync_sm90.hpp"
#include "kernels/sm90/common/wgmma_sm90.hpp"
#include "kernels/sm90/common/exp2_approx.hpp"
#include "kernels/sm90/common/softcap_sm90.hpp"

namespace dash_attn::sm90::bwd {

template <class Traits>
struct BwdMainloop {
  using Element = typename Traits::Element;
  using SharedStorage = typename Traits::SharedStorage;
  static constexpr int kBlockM = Traits::kBlockM;
  static constexpr int kBlockN = Traits::kBlockN;
  static constexpr int kHeadDim = Traits::kHeadDim;
  static constexpr uint32_t kDqBarrierThreads = Traits::kMmaThreads + 32;
  static constexpr int kDsElements = cosize_v<typename Traits::SmemLayoutDs>;

  const BwdParams<Traits>& params;
  SharedStorage& smem;
  int thread;  // 0..kMmaThreads-1
  cutlass::PipelineState<Traits::kStages> pipe;
  int ds_stage = 0;
  int dkv_store_stage = -1;  // the dS stage the previous chain's dK/dV TMA stores may still read (-1: none; hdim 128: both)

  // Accumulates dK (unscaled) and dV of the chain over its Q tiles into the given fragments.
  template <class FragDk, class FragDv>
  __device__ void run_chain(const ChainWork& work, uint32_t kv_phase, FragDk& dk, FragDv& dv) {
    const schedule::HeadTiles tiles = Traits::compiled_tiles(work.tiles);
    typename Traits::TiledMmaSdP mma_sdp;
    typename Traits::TiledMmaDkv mma_dkv;
    typename Traits::TiledMmaDq mma_dq;
    // Shared-memory operands by warpgroup (descriptors in uniform registers,
    // no R2UR before each HGMMA), accumulators by thread. H200 (docs/perf_log.md):
    // an A/B read hdim 128 +0-6%, beside the peers it measured no change
    // (2026-12-04); hdim 64 lost 1-3% (its spills rose 824 -> 856 B), so it
    // keeps the thread's own index; hdim 256 takes the warpgroup's (tested,
    // not timed).
    const int warpgroup_thread = kHeadDim > 64 ? warpgroup_first_thread(thread) : thread;
    auto thr_sdp = mma_sdp.get_thread_slice(thread);
    auto wg_sdp = mma_sdp.get_thread_slice(warpgroup_thread);
    auto wg_dkv = mma_dkv.get_thread_slice(warpgroup_thread);
    auto wg_dq = mma_dq.get_thread_slice(warpgroup_thread);

    Tensor s_q = make_tensor(make_smem_ptr(smem.q), typename Traits::SmemLayoutQ{});
    Tensor s_qt = make_tensor(make_smem_ptr(smem.q), typename Traits::SmemLayoutQt{});
    Tensor s_do = make_tensor(make_smem_ptr(smem.dout), typename Traits::SmemLayoutQ{});
    Tensor s_dot = make_tensor(make_smem_ptr(smem.dout), typename Traits::SmemLayoutQt{});
    Tensor s_k = make_tensor(make_smem_ptr(smem.k), typename Traits::SmemLayoutK{});
    Tensor s_kt = make_tensor(make_smem_ptr(smem.k), typename Traits::SmemLayoutKt{});
    Tensor s_v = make_tensor(make_smem_ptr(smem.v), typename Traits::SmemLayoutK{});
    Tensor s_ds = make_tensor(make_smem_ptr(smem.ds), typename Traits::SmemLayoutDs{});
    Tensor s_dst = make_tensor(make_smem_ptr(smem.ds), typename Traits::SmemLayoutDst{});
    // P^T stages after the dS stages (kSplitHeadDim: P^T goes through shared memory too).
    Tensor s_pt = make_tensor(make_smem_ptr(smem.ds + kDsElements), typename Traits::SmemLayoutDst{});

    Tensor t_k = wg_sdp.partition_fragment_A(s_k);
    Tensor t_v = wg_sdp.partition_fragment_A(s_v);
    Tensor t_q = wg_sdp.partition_fragment_B(s_q);
    Tensor t_do = wg_sdp.partition_fragment_B(s_do);
    Tensor t_dot = wg_dkv.partition_fragment_B(s_dot);
    Tensor t_qt = wg_dkv.partition_fragment_B(s_qt);
    Tensor t_ds = wg_dq.partition_fragment_A(s_ds);
    Tensor t_kt = wg_dq.partition_fragment_B(s_kt);
    // dS^T fragments -> shared memory with stmatrix: each 8x8 block row is 8
    // consecutive Q rows, contiguous in the M-major dS layout.
    auto r2s_ds = make_tiled_copy_C(typename Traits::SmemCopyAtomAcc{}, mma_sdp);
    auto thr_r2s_ds = r2s_ds.get_thread_slice(thread);
    Tensor t_ds_store = thr_r2s_ds.partition_D(as_position_independent_swizzle_tensor(s_dst));

    // (key, row) of every S^T element this thread holds.
    Tensor coord_s = thr_sdp.partition_C(make_identity_tensor(Shape<Int<kBlockN>, Int<kBlockM>>{}));

    clear(dk);
    clear(dv);
    cutlass::arch::ClusterBarrier::wait(&smem.kv_full, kv_phase);
    // hdim 128: the previous chain's dV store reads both dS stages. Waiting
    // here keeps the step loop free of it (a check in every step cost 2-7%).
    if constexpr (Traits::kDkvTmaStore && !Traits::kDkvInOneDsStage)
      if (dkv_store_stage >= 0) await_dkv_store();

    // The mask at the compile-time tile sizes (tiles' own are the same, known only at run time).
    const mask::MaskGeometry element_mask =
        mask::mask_geometry(tiles.seqlen_q, tiles.seqlen_k, kBlockM, kBlockN, tiles.window());
    // Every q-head the chain walks (the cursor's passes) runs the same Q
    // tiles in the same order; only the producer's loads and the dQ tiles differ.
    for (auto cursor = params.schedule.chain_walk(tiles, work.kv); cursor.valid(); cursor.advance()) {
      const int q_tile = cursor.q_tile();
      const int stage = pipe.index();

      Tensor s_acc = partition_fragment_C(mma_sdp, Shape<Int<kBlockN>, Int<kBlockM>>{});
      Tensor dp_acc = partition_fragment_C(mma_sdp, Shape<Int<kBlockN>, Int<kBlockM>>{});
      cutlass::arch::ClusterBarrier::wait(&smem.q_full[stage], pipe.phase());
      // dP^T's accumulator starts at -D and, kLseInAccumulator, S^T's at -LSE
      // (bwd_row_stats.hpp; both travel with Q): the steps after the waits
      // then load nothing, and dS^T needs no subtraction. H200 A/B against
      // loading them there (docs/perf_log.md, 2026-12-04): -D hdim 64 +0-3%,
      // hdim 256 even; hdim 128 with -LSE too +1-10%. Filled before the
      // step's first GEMM: written while S^T's GEMM ran, ptxas made the dP
      // GEMM wait for it (C7517).
      const float* minus_lse = smem.minus_lse[stage];
      const float* minus_d = smem.minus_d[stage];
      CUTE_UNROLL
      for (int i = 0; i < size(dp_acc); ++i) dp_acc(i) = minus_d[get<1>(coord_s(i))];
      warpgroup_fence_operand(dp_acc);
      if constexpr (Traits::kLseInAccumulator) {
        CUTE_UNROLL
        for (int i = 0; i < size(s_acc); ++i) s_acc(i) = minus_lse[get<1>(coord_s(i))];
        warpgroup_fence_operand(s_acc);
      }
      wgmma_gemm<!Traits::kLseInAccumulator>(mma_sdp, t_k, t_q(_, _, _, stage), s_acc);
      cutlass::arch::ClusterBarrier::wait(&smem.dout_full[stage], pipe.phase());
      wgmma_gemm<false>(mma_sdp, t_v, t_do(_, _, _, stage), dp_acc);

      // P^T = exp2(x * scale_log2 - lse_log2), x = S^T, or with a softcap
      // tanh(S^T * softcap_scale), whose derivative 1 - tanh^2 dS^T needs.
      warpgroup_wait<1>();
      [[maybe_unused]] decltype(make_fragment_like(s_acc)) dtanh;
      if constexpr (Traits::kSoftcap) {
        CUTE_UNROLL
        for (int i = 0; i < size(s_acc); ++i) {
          s_acc(i) = softcap_tanh(s_acc(i) * params.softcap_scale);
          dtanh(i) = fmaf(-s_acc(i), s_acc(i), 1.0f);
        }
      }
      CUTE_UNROLL
      for (int i = 0; i < size(s_acc); ++i)
        s_acc(i) = exp2_approx(Traits::kLseInAccumulator ? s_acc(i) * params.scale_log2
                                                         : fmaf(s_acc(i), params.scale_log2, minus_lse[get<1>(coord_s(i))]));
      // Hidden keys (past seqlen_k, past a causal row's last visible key or
      // outside a window) get P = 0 after the exponential: selecting its
      // input or skipping it per element compiled to a serial chain of
      // predicated loads (~+60% on a hdim 64 step).
      if (tiles.needs_mask(q_tile, work.kv)) {
        if constexpr (Traits::kScoreMods) {
          // The chain visits only tiles with work: hidden_in_band's precondition.
          const mask::TileLocalMask local = element_mask.tile_local_mask(q_tile, work.kv);
          CUTE_UNROLL
          for (int i = 0; i < size(s_acc); ++i)
            if (local.hidden_in_band(get<0>(coord_s(i)), get<1>(coord_s(i)))) s_acc(i) = 0.f;
        } else {
          const mask::TileLocalMask local = element_mask.tile_local_mask_none_or_causal(q_tile, work.kv);
          CUTE_UNROLL
          for (int i = 0; i < size(s_acc); ++i)
            if (local.hidden<false>(get<0>(coord_s(i)), get<1>(coord_s(i)))) s_acc(i) = 0.f;
        }
      }

      // dS^T = P^T o (dP^T - D) (o (1 - tanh^2) under a softcap); the accumulator holds dP^T - D.
      warpgroup_wait<0>();
      CUTE_UNROLL
      for (int i = 0; i < size(dp_acc); ++i) dp_acc(i) = s_acc(i) * dp_acc(i);
      if constexpr (Traits::kSoftcap) {
        CUTE_UNROLL
        for (int i = 0; i < size(dp_acc); ++i) dp_acc(i) *= dtanh(i);
      }

      Tensor p16 = convert_fragment<Element>(s_acc);
      Tensor ds16 = convert_fragment<Element>(dp_acc);
      if constexpr (Traits::kDkvInOneDsStage)
        if (ds_stage == dkv_store_stage) await_dkv_store();
      copy(r2s_ds, thr_r2s_ds.retile_S(ds16), t_ds_store(_, _, _, ds_stage));
      if constexpr (Traits::kSplitHeadDim)
        copy(r2s_ds, thr_r2s_ds.retile_S(p16), thr_r2s_ds.partition_D(as_position_independent_swizzle_tensor(s_pt))(_, _, _, ds_stage));
      fence_proxy_async_shared();

      if constexpr (Traits::kSplitHeadDim) {
        // Every GEMM reads both warpgroups' Q rows of P^T and dS^T.
        named_barrier_sync(static_cast<uint32_t>(BwdBarrier::kDsReady), Traits::kMmaThreads);
        Tensor dq_acc = partition_fragment_C(mma_dq, Shape<Int<kBlockM>, Int<kHeadDim>>{});
        wgmma_gemm<true>(mma_dq, t_ds(_, _, _, ds_stage), t_kt, dq_acc);
        wgmma_gemm<false>(mma_dkv, wg_dkv.partition_fragment_A(s_pt)(_, _, _, ds_stage), t_dot(_, _, _, stage), dv);
        wgmma_gemm<false>(mma_dkv, wg_dkv.partition_fragment_A(s_dst)(_, _, _, ds_stage), t_qt(_, _, _, stage), dk);
        warpgroup_wait<0>();
        // The other warpgroup's dK and dV GEMMs may still read this Q and dO.
        named_barrier_sync(static_cast<uint32_t>(BwdBarrier::kQStageRead), Traits::kMmaThreads);
        store_dq_over_stage(dq_acc, stage);
      } else {
        Tensor p_a = make_tensor(p16.data(), accumulator_as_a_operand(p16.layout()));
        Tensor ds_a = make_tensor(ds16.data(), accumulator_as_a_operand(ds16.layout()));
        wgmma_gemm<false>(mma_dkv, p_a, t_dot(_, _, _, stage), dv);
        // dQ needs both warpgroups' dS columns.
        named_barrier_sync(static_cast<uint32_t>(BwdBarrier::kDsReady), Traits::kMmaThreads);
        Tensor dq_acc = partition_fragment_C(mma_dq, Shape<Int<kBlockM>, Int<kHeadDim>>{});
        wgmma_gemm<true>(mma_dq, t_ds(_, _, _, ds_stage), t_kt, dq_acc);
        wgmma_gemm<false>(mma_dkv, ds_a, t_qt(_, _, _, stage), dk);
        warpgroup_wait<1>();
        store_dq_tile(dq_acc, stage);
      }
      warpgroup_wait<0>();
      // Q, dO and the row statistics of this stage are no longer read: hand
      // them back. Every thread releases the Q stage, whose LSE and D it read
      // with ordinary loads (and, kDqInQStage, over which it wrote dQ), so
      // each access is ordered before the producer's next copy by that
      // thread's own arrive (one arrive per warp after a barrier is ordered
      // too, but racecheck cannot see that and reports the reuse); dO is read
      // by wgmma only. kDqInQStage: the dQ writer arrives on q_empty too, after
      // its bulk add has read the stage, and q_empty guards dO as well.
      cutlass::arch::ClusterBarrier::arrive(&smem.q_empty[stage]);
      if constexpr (!Traits::kDqInQStage)
        if (thread % 32 == 0) cutlass::arch::ClusterBarrier::arrive(&smem.dout_empty[stage]);
      ++pipe;
      ds_stage ^= 1;
    }
    // This thread's GEMMs no longer read K and V: the producer may load the
    // next chain's (kDkvStagedInKv: after the epilogue, when it stores dK/dV).
    if (!Traits::kDkvStagedInKv || params.dk_accum != nullptr) cutlass::arch::ClusterBarrier::arrive(&smem.kv_empty);
  }

  // Where the epilogue stages a chain's final dK and dV when TMA stores them
  // (stored_async: TMA stores them, BwdEpilogue::stores_by_tma): hdim 64 in
  // the dS stage of the chain's last step, hdim 128 over both dS stages.
  __device__ Element* dkv_staging(bool stored_async) {
    if constexpr (Traits::kDkvInOneDsStage) {
      if (stored_async) dkv_store_stage = ds_stage ^ 1;
      return smem.ds + (ds_stage ^ 1) * kBlockM * kBlockN;
    } else {
      if (Traits::kDkvTmaStore && stored_async) dkv_store_stage = 0;
      return smem.ds;
    }
  }

  // Before the CTA exits: the dK/dV TMA stores thread 0 issued have completed.
  __device__ void finish() {
    if (Traits::kDkvTmaStore && thread == 0) bulk_wait_all_complete();
  }

 private:
  // The previous chain's dK/dV stores read this dS stage: wait until they have.
  __device__ void await_dkv_store() {
    if (thread == 0) tma_store_wait<0>();
    named_barrier_sync(static_cast<uint32_t>(BwdBarrier::kEpilogue), Traits::kMmaThreads);
    dkv_store_stage = -1;
  }

  // kDqInQStage: partial dQ -> the Q/dO stage this step has finished reading
  // (the stage's dQ writer warp drains it).
  template <class FragDq>
  __device__ void store_dq_over_stage(const FragDq& dq_acc, int stage) {
    // The second half's base is indexed by the tile's float offset, as the first's.
    write_dq(dq_acc, smem.dq_over_stage(stage, 0), smem.dq_over_stage(stage, 1) - Traits::kDqTileFloats / 2, stage);
  }

  // Partial dQ -> the dQ stage of the step's Q stage once its writer has read it.
  template <class FragDq>
  __device__ void store_dq_tile(const FragDq& dq_acc, int stage) {
    named_barrier_sync(dq_empty_barrier(stage, thread / 128), kDqEmptyBarrierThreads);
    write_dq(dq_acc, smem.dq[stage], smem.dq[stage], stage);
  }

  // Writes the fragment in the dQ tile's fragment order (bwd_dq_layout.hpp;
  // the tile's first half from `first`, the second from `second`), then
  // signals the stage's dQ writer.
  template <class FragDq>
  __device__ void write_dq(const FragDq& dq_acc, float* first, float* second, int stage) {
    static_assert(Traits::kMmaThreads == kDqTileThreads && decltype(size(dq_acc))::value % 4 == 0);
    constexpr int kChunks = decltype(size(dq_acc))::value / 4;
    CUTE_UNROLL
    for (int chunk = 0; chunk < kChunks; ++chunk) {
      float* tile = chunk < kChunks / 2 ? first : second;
      *reinterpret_cast<float4*>(tile + (chunk * kDqTileThreads + thread) * 4) =
          make_float4(dq_acc(4 * chunk), dq_acc(4 * chunk + 1), dq_acc(4 * chunk + 2), dq_acc(4 * chunk + 3));
    }
    fence_proxy_async_shared();
    named_barrier_arrive(static_cast<uint32_t>(BwdBarrier::kDqFull0) + stage, kDqBarrierThreads);
  }
};

}  // namespace dash_attn::sm90::bwd
