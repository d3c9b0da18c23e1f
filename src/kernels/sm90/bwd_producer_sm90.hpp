// The producer warp: TMA loads of K and V once per chain, and of Q (+ its
// row statistics LSE and D) and dO per Q tile through the mbarrier pipelines,
// in the chain's Q-tile order. One lane issues everything.
#pragma once

#include "bwd_mainloop_sm90.hpp"

namespace dash_attn::sm90::bwd {

template <class Traits>
struct BwdProducer {
  static constexpr int kBlockM = Traits::kBlockM;
  static constexpr int kBlockN = Traits::kBlockN;
  static constexpr int kHeadDim = Traits::kHeadDim;

  const BwdParams<Traits>& params;
  typename Traits::SharedStorage& smem;
  PipelineState<Traits::kStages> pipe;

  __device__ void run_chain(const ChainWork& work) {
    const schedule::TileProblem& p = params.problem;
    Tensor m_q = params.tma_q.get_tma_tensor(make_shape(p.seqlen_q, Int<kHeadDim>{}, p.heads_q, p.batch));
    Tensor m_do = params.tma_dout.get_tma_tensor(make_shape(p.seqlen_q, Int<kHeadDim>{}, p.heads_q, p.batch));
    Tensor m_k = params.tma_k.get_tma_tensor(make_shape(p.seqlen_k, Int<kHeadDim>{}, p.heads_kv, p.batch));
    Tensor m_v = params.tma_v.get_tma_tensor(make_shape(p.seqlen_k, Int<kHeadDim>{}, p.heads_kv, p.batch));
    auto q_tiler = Shape<Int<kBlockM>, Int<kHeadDim>>{};
    auto k_tiler = Shape<Int<kBlockN>, Int<kHeadDim>>{};
    Tensor g_q = local_tile(m_q(_, _, work.head_q, work.batch), q_tiler, make_coord(_, _0{}));
    Tensor g_do = local_tile(m_do(_, _, work.head_q, work.batch), q_tiler, make_coord(_, _0{}));
    Tensor g_k = local_tile(m_k(_, _, work.head_kv, work.batch), k_tiler, make_coord(work.kv, _0{}));
    Tensor g_v = local_tile(m_v(_, _, work.head_kv, work.batch), k_tiler, make_coord(work.kv, _0{}));

    Tensor s_q = make_tensor(make_smem_ptr(smem.q), typename Traits::SmemLayoutQ{});
    Tensor s_do = make_tensor(make_smem_ptr(smem.dout), typename Traits::SmemLayoutQ{});
    Tensor s_k = make_tensor(make_smem_ptr(smem.k), typename Traits::SmemLayoutK{});
    Tensor s_v = make_tensor(make_smem_ptr(smem.v), typename Traits::SmemLayoutK{});
    auto [tma_g_q, tma_s_q] = tma_partition(params.tma_q, Int<0>{}, Layout<_1>{}, group_modes<0, 2>(s_q), group_modes<0, 2>(g_q));
    auto [tma_g_do, tma_s_do] = tma_partition(params.tma_dout, Int<0>{}, Layout<_1>{}, group_modes<0, 2>(s_do), group_modes<0, 2>(g_do));
    auto [tma_g_k, tma_s_k] = tma_partition(params.tma_k, Int<0>{}, Layout<_1>{}, group_modes<0, 2>(s_k), group_modes<0, 2>(g_k));
    auto [tma_g_v, tma_s_v] = tma_partition(params.tma_v, Int<0>{}, Layout<_1>{}, group_modes<0, 2>(s_v), group_modes<0, 2>(g_v));

    using Barrier = cutlass::arch::ClusterTransactionBarrier;
    Barrier::arrive_and_expect_tx(&smem.kv_full, 2 * Traits::kKBytes);
    copy(params.tma_k.with(smem.kv_full), tma_g_k, tma_s_k);
    copy(params.tma_v.with(smem.kv_full), tma_g_v, tma_s_v);

    const int64_t row_stats =
        (static_cast<int64_t>(work.batch) * p.heads_q + work.head_q) * work.tiles.q_tiles() * kBlockM;
    for (auto cursor = params.schedule.chain(work.tiles, work.kv); cursor.valid(); cursor.advance()) {
      const int q_tile = cursor.q_tile();
      const int stage = pipe.stage;
      const int64_t first_row = row_stats + static_cast<int64_t>(q_tile) * kBlockM;
      cutlass::arch::ClusterBarrier::wait(&smem.q_empty[stage], pipe.phase ^ 1);
      // Both row statistics travel with Q: the Q stage is the one every MMA thread releases.
      Barrier::arrive_and_expect_tx(&smem.q_full[stage], Traits::kQBytes + 2 * Traits::kRowStatBytes);
      copy(params.tma_q.with(smem.q_full[stage]), tma_g_q(_, q_tile), tma_s_q(_, stage));
      bulk_copy_g2s(smem.lse_log2[stage], params.lse_log2 + first_row, Traits::kRowStatBytes, &smem.q_full[stage]);
      bulk_copy_g2s(smem.dpsum[stage], params.dpsum + first_row, Traits::kRowStatBytes, &smem.q_full[stage]);
      // kDqInQStage: q_empty covers dO too (the dQ tile lay over both).
      if constexpr (!Traits::kDqInQStage) cutlass::arch::ClusterBarrier::wait(&smem.dout_empty[stage], pipe.phase ^ 1);
      Barrier::arrive_and_expect_tx(&smem.dout_full[stage], Traits::kQBytes);
      copy(params.tma_dout.with(smem.dout_full[stage]), tma_g_do(_, q_tile), tma_s_do(_, stage));
      pipe.advance();
    }
  }
};

}  // namespace dash_attn::sm90::bwd
