// The producer warp: claims the work items, publishes their chains to the MMA
// warpgroups and each step's dQ task to the dQ writers, and issues the TMA
// loads: K and V once per chain, Q (+ its row statistics LSE and D) and dO per
// Q tile through the mbarrier pipelines, in the chain's Q-tile order, for
// each q-head the chain walks (Schedule::chain_heads). One lane does
// everything.
//
// It runs a chain ahead of the MMA warpgroups: the next chain's first Q/dO
// tile is loaded during the current chain's last step, and its K/V as soon as
// the last GEMM of the current chain has read K and V (kv_empty), while the
// MMA warpgroups write dK/dV back. Claiming the next item early is live when
// every wait targets an earlier claim: a CTA's claimed-but-unstarted item is
// always later than the one it works on, so the earliest unfinished item is
// one a CTA works on and it waits for nobody unfinished. Wave schedules wait
// on later wave members, which an early claim could hold back behind a chain
// that waits for them; for them the producer claims only once its CTA has
// finished everything claimed before (params.claim_ahead == false).
//
// Varlen: the whole producer warp takes each claim to find its sequence (a
// shuffle scan over the item counts of the sequences in claim order,
// sequence_scan_sm90.hpp); lane 0 alone loads and publishes, as for equal lengths.
#pragma once

#include "bwd_mainloop_sm90.hpp"
#include "kernels/sm90/common/sequence_scan_sm90.hpp"

namespace dash_attn::sm90::bwd {

template <class Traits>
struct BwdProducer {
  static constexpr int kBlockM = Traits::kBlockM;
  static constexpr int kBlockN = Traits::kBlockN;
  static constexpr int kHeadDim = Traits::kHeadDim;

  const BwdParams<Traits>& params;
  typename Traits::SharedStorage& smem;
  // Steps issued so far (Q tiles loaded, dQ tasks published): the next
  // step's Q/dO stage (and dQ stage) is bit 0, the stage's phase bit 1, and
  // bit 2 the phase of its task slot.
  uint32_t steps = 0;
  cutlass::PipelineState<2> chain_slot;  // next slot of the chain ring; its stage is the parity of the chains published

  __device__ void run() {
    for (;;) {
      if (!params.claim_ahead) wait_until_drained();
      const int index = atomicAdd(params.work_counter, 1);
      if (index >= params.total_items) break;
      const schedule::WorkItem item = params.schedule.work_item(params.problem, index);
      run_item(item);
    }
    stop();
  }

  // Varlen (all 32 lanes of the warp): claims until the scan finds no item.
  // The claims walk the sequences in params.sequence_order.order (longest first);
  // the claims of a run of equal-length sequences are the run's items in
  // Schedule's order (work_item_of_run: heads dealt across the run). Only
  // atomic, fa3 and descending run varlen: the claims run ahead.
  // A claim inside the run of the previous claim decodes its item from the
  // run's bounds and lengths, kept in every lane: no scan and none of the
  // scan's dependent loads (the order, the run, the lengths), which sat
  // between a chain's last step and the next chain's K/V (ncu, 32 x 512 GQA
  // 32/8 hdim 64: the MMA warpgroups' K/V waits retried 6x as often as at
  // equal lengths). An equal-length batch is one run.
  __device__ void run_varlen() {
    const schedule::TileProblem& p = params.problem;
    const int lane = static_cast<int>(threadIdx.x % 32);
    const int* order = params.sequence_order.order;
    SequenceCursor cursor;
    ClaimRun run;
    for (;;) {
      int index = 0;
      if (lane == 0) index = atomicAdd(params.work_counter, 1);
      index = __shfl_sync(0xffffffffu, index, 0);
      if (index < run.begin || index >= run.end) {  // the same in every lane
        const SequenceIndex at = find_sequence(
            p.batch, [&](int position) { return params.schedule.items_of_sequence(p, order[position]); }, cursor,
            index);
        if (at.sequence >= p.batch) break;
        run = claim_run(at, index);
      }
      if (lane == 0) {
        schedule::WorkItem item = params.schedule.work_item_of_run(
            p, p.tiles_of_lengths(run.seqlen_q, run.seqlen_k), run.length, index - run.begin);
        item.batch = order[run.first_position + item.batch];
        run_item(item);
      }
      __syncwarp();
    }
    if (lane == 0) stop();
    __syncwarp();
  }

 private:
  // A run of equal-length sequences in claim order: its claim indices
  // [begin, end), its first position in the order, its sequences' count and lengths.
  struct ClaimRun {
    int begin = 0, end = 0;
    int first_position = 0, length = 0;
    int seqlen_q = 0, seqlen_k = 0;
  };

  // The run holding claim `index`, found by the scan at `at` (every lane loads the same).
  __device__ ClaimRun claim_run(const SequenceIndex& at, int index) const {
    const schedule::TileProblem& p = params.problem;
    ClaimRun run;
    run.first_position = params.sequence_order.run_first[at.sequence];
    run.length = params.sequence_order.run_length[at.sequence];
    const schedule::HeadTiles tiles = p.head_tiles(params.sequence_order.order[at.sequence]);
    run.seqlen_q = tiles.seqlen_q;
    run.seqlen_k = tiles.seqlen_k;
    const int items = params.schedule.items_of_sequence(p, tiles);
    run.begin = index - ((at.sequence - run.first_position) * items + at.local);
    run.end = run.begin + run.length * items;
    return run;
  }

  __device__ void run_item(const schedule::WorkItem& item) {
    // Constant indices into item.kv keep the item in registers.
    run_chain(ChainWork{item.batch, item.head_q, item.head_kv, item.kv[0], item.tiles});
    if (item.num_chains > 1) run_chain(ChainWork{item.batch, item.head_q, item.head_kv, item.kv[1], item.tiles});
  }

  // Everything is claimed: the MMA warpgroups and each dQ writer (one more
  // task from its stage) stop.
  __device__ void stop() {
    ChainWork done{};
    done.kv = -1;
    publish_chain(done);
    for (int s = 0; s < Traits::kStages; ++s) publish_task(DqTask{-1, 0, 0, 0, 0});
  }

  __device__ void run_chain(const ChainWork& work) {
    publish_chain(work);
    const schedule::HeadTiles tiles = Traits::compiled_tiles(work.tiles);
    // A chain without Q tiles (a varlen sequence with keys but no queries)
    // still loads K and V: the MMA warpgroups wait for them, then store dK = dV = 0.
    if (!params.schedule.chain(tiles, work.kv).valid()) load_kv(work);
    for (auto cursor = params.schedule.chain_walk(tiles, work.kv); cursor.valid(); cursor.advance())
      load_step(work, cursor.q_tile(), work.head_q + cursor.pass(), cursor.step() == 0);
  }

  // One step: Q tile q_tile of q-head head_q (+ its LSE and D) and its dO
  // into the next stage, its dQ task, and after the chain's first Q tile
  // (first_step) K and V, whose stage the previous chain freed earlier.
  __device__ void load_step(const ChainWork& work, int q_tile, int head_q, bool first_step) {
    const schedule::TileProblem& p = params.problem;
    const auto q_shape = make_shape(params.tma_rows_q(), Int<kHeadDim>{}, p.heads_q, params.tma_batches());
    Tensor m_q = params.tma_q.get_tma_tensor(q_shape);
    Tensor m_do = params.tma_dout.get_tma_tensor(q_shape);
    auto q_tiler = Shape<Int<kBlockM>, Int<kHeadDim>>{};
    const auto rows = make_coord(params.first_row_q(work.batch), 0);
    const int tma_batch = params.tma_batch(work.batch);
    Tensor g_q = local_tile(domain_offset(rows, m_q(_, _, head_q, tma_batch)), q_tiler, make_coord(_, _0{}));
    Tensor g_do = local_tile(domain_offset(rows, m_do(_, _, head_q, tma_batch)), q_tiler, make_coord(_, _0{}));
    Tensor s_q = make_tensor(make_smem_ptr(smem.q), typename Traits::SmemLayoutQ{});
    Tensor s_do = make_tensor(make_smem_ptr(smem.dout), typename Traits::SmemLayoutQ{});
    auto [tma_g_q, tma_s_q] = tma_partition(params.tma_q, Int<0>{}, Layout<_1>{}, group_modes<0, 2>(s_q), group_modes<0, 2>(g_q));
    auto [tma_g_do, tma_s_do] = tma_partition(params.tma_dout, Int<0>{}, Layout<_1>{}, group_modes<0, 2>(s_do), group_modes<0, 2>(g_do));

    using Barrier = cutlass::arch::ClusterTransactionBarrier;
    const int64_t tile = params.accum.first_q_tile(p, work.batch, head_q) + q_tile;
    const int stage = steps % 2;
    const uint32_t phase = steps / 2 % 2;
    const int64_t first_row = tile * kBlockM;
    cutlass::arch::ClusterBarrier::wait(&smem.q_empty[stage], phase ^ 1);
    // Both row statistics travel with Q: the Q stage is the one every MMA thread releases.
    Barrier::arrive_and_expect_tx(&smem.q_full[stage], Traits::kQBytes + 2 * Traits::kRowStatBytes);
    copy(params.tma_q.with(smem.q_full[stage]), tma_g_q(_, q_tile), tma_s_q(_, stage));
    bulk_copy_g2s(smem.minus_lse[stage], params.minus_lse + first_row, Traits::kRowStatBytes, &smem.q_full[stage]);
    bulk_copy_g2s(smem.minus_d[stage], params.minus_d + first_row, Traits::kRowStatBytes, &smem.q_full[stage]);
    // kDqInQStage: q_empty covers dO too (the dQ tile lay over both).
    if constexpr (!Traits::kDqInQStage) cutlass::arch::ClusterBarrier::wait(&smem.dout_empty[stage], phase ^ 1);
    Barrier::arrive_and_expect_tx(&smem.dout_full[stage], Traits::kQBytes);
    copy(params.tma_dout.with(smem.dout_full[stage]), tma_g_do(_, q_tile), tma_s_do(_, stage));
    // The dQ writer needs its task only once the loads are on their way.
    publish_task(DqTask{static_cast<int>(tile), work.kv, q_tile, work.tiles.seqlen_q, work.tiles.seqlen_k});
    if (first_step) load_kv(work);
  }

  // Waits until the previous chain's last GEMM has read K and V, then loads this chain's.
  __device__ void load_kv(const ChainWork& work) {
    const schedule::TileProblem& p = params.problem;
    const auto k_shape = make_shape(params.tma_rows_k(), Int<kHeadDim>{}, p.heads_kv, params.tma_batches());
    Tensor m_k = params.tma_k.get_tma_tensor(k_shape);
    Tensor m_v = params.tma_v.get_tma_tensor(k_shape);
    auto k_tiler = Shape<Int<kBlockN>, Int<kHeadDim>>{};
    const auto rows = make_coord(params.first_row_k(work.batch), 0);
    const int tma_batch = params.tma_batch(work.batch);
    Tensor g_k = local_tile(domain_offset(rows, m_k(_, _, work.head_kv, tma_batch)), k_tiler, make_coord(work.kv, _0{}));
    Tensor g_v = local_tile(domain_offset(rows, m_v(_, _, work.head_kv, tma_batch)), k_tiler, make_coord(work.kv, _0{}));
    Tensor s_k = make_tensor(make_smem_ptr(smem.k), typename Traits::SmemLayoutK{});
    Tensor s_v = make_tensor(make_smem_ptr(smem.v), typename Traits::SmemLayoutK{});
    auto [tma_g_k, tma_s_k] = tma_partition(params.tma_k, Int<0>{}, Layout<_1>{}, group_modes<0, 2>(s_k), group_modes<0, 2>(g_k));
    auto [tma_g_v, tma_s_v] = tma_partition(params.tma_v, Int<0>{}, Layout<_1>{}, group_modes<0, 2>(s_v), group_modes<0, 2>(g_v));
    // This chain is the n-th published (n counted from 1, n % 2 == chain_slot.index());
    // its predecessor's release completes phase n - 2 (the first chain's wait passes at once).
    cutlass::arch::ClusterBarrier::wait(&smem.kv_empty, chain_slot.index());
    using Barrier = cutlass::arch::ClusterTransactionBarrier;
    Barrier::arrive_and_expect_tx(&smem.kv_full, 2 * Traits::kKBytes);
    copy(params.tma_k.with(smem.kv_full), tma_g_k, tma_s_k);
    copy(params.tma_v.with(smem.kv_full), tma_g_v, tma_s_v);
  }

  // Hands the dQ writer of the step's stage its task (after the writer has
  // read the slot's previous task) and counts the step.
  __device__ void publish_task(const DqTask& task) {
    const int stage = steps % 2, slot = steps / 2 % 2;
    cutlass::arch::ClusterBarrier::wait(&smem.dq_task_empty[stage][slot], (steps / 4 % 2) ^ 1);
    smem.dq_tasks[stage][slot] = task;
    cutlass::arch::ClusterBarrier::arrive(&smem.dq_task_full[stage][slot]);
    ++steps;
  }

  __device__ void publish_chain(const ChainWork& work) {
    cutlass::arch::ClusterBarrier::wait(&smem.chain_empty[chain_slot.index()], chain_slot.phase() ^ 1);
    smem.chains[chain_slot.index()] = work;
    cutlass::arch::ClusterBarrier::arrive(&smem.chain_full[chain_slot.index()]);
    ++chain_slot;
  }

  // Until the MMA warpgroups have finished the last published chain (dK/dV
  // written) and the dQ writers every published add (released).
  __device__ void wait_until_drained() {
    if (steps == 0) return;
    // The last published chain used the slot before chain_slot.
    const int last = chain_slot.index() ^ 1;
    const uint32_t last_phase = chain_slot.index() == 0 ? chain_slot.phase() ^ 1 : chain_slot.phase();
    cutlass::arch::ClusterBarrier::wait(&smem.chain_empty[last], last_phase);
    while (atomicAdd(&smem.dq_tasks_done, 0) < static_cast<int>(steps)) __nanosleep(32);
  }
};

}  // namespace dash_attn::sm90::bwd
