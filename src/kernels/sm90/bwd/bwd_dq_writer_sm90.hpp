// The dQ writer warps: add each partial dQ tile the MMA warpgroups leave in
// shared memory into the fp32 accumulator with one TMA bulk reduce-add.
// Deterministic mode follows the contract: one lane acquire-spins until the
// tile's counter equals this contribution's rank, adds (rank 0 stores: the
// accumulator is not zeroed for ordered adds), waits until the write has
// completed in global memory, then releases (fence + increment). The
// shared stage is handed back as soon as the engine has read it, so the MMA
// warpgroups compute the next Q tile while the completion wait runs here.
//
// One writer warp per dQ stage, each taking the tiles that land in its stage
// (every other Q tile); which tile and rank each one is, the producer
// publishes when it loads the step's Q tile (DqTask). One warp for both stages serializes acquire -> add ->
// completion -> release of consecutive tiles, and that chain is longer than
// a step of the MMA warpgroups, so ordered schedules fell behind atomic at
// every length; with two warps one tile's completion wait overlaps the next
// tile's acquire and add. Each warp's releases still follow its own
// completions, and no warp defers a release past an acquire.
//
// kDqInQStage (hdim 256): the tile lies over the Q/dO stage it came from, so
// the warp adds it in two halves and hands that stage back to the producer.
#pragma once

#include "bwd_params_sm90.hpp"
#include "bwd_barriers_sm90.hpp"
#include "kernels/sm90/common/sync_sm90.hpp"

namespace dash_attn::sm90::bwd {

template <class Traits>
struct DqWriter {
  static constexpr uint32_t kBarrierThreads = Traits::kMmaThreads + 32;
  static constexpr uint32_t kTileBytes = Traits::kDqTileFloats * sizeof(float);

  const BwdParams<Traits>& params;
  typename Traits::SharedStorage& smem;
  int lane;
  int own_stage;  // the dQ stage this warp drains

  // Takes the tasks the producer publishes for this warp's stage until the stop.
  __device__ void run() {
    // The stage starts empty (kDqInQStage: the producer owns it first).
    if constexpr (!Traits::kDqInQStage) release_stage(own_stage);
    const bool ordered = params.trusts_ranks();
    for (uint32_t use = 0;; ++use) {
      const int slot = use & 1;
      cutlass::arch::ClusterBarrier::wait(&smem.dq_task_full[own_stage][slot], (use >> 1) & 1);
      const DqTask task = smem.dq_tasks[own_stage][slot];
      cutlass::arch::ClusterBarrier::arrive(&smem.dq_task_empty[own_stage][slot]);
      if (task.done()) break;
      float* tile = params.dq_accum + static_cast<int64_t>(task.tile) * Traits::kDqTileFloats;
      const schedule::HeadTiles tiles = params.problem.tiles_of_lengths(task.seqlen_q, task.seqlen_k);
      const int rank = ordered ? params.schedule.rank(Traits::compiled_tiles(tiles), task.kv, task.q_tile)
                               : schedule::kUnordered;
      int* counter = rank != schedule::kUnordered ? params.dq_counters + task.tile : nullptr;
      // Acquire before the tile is ready: the wait for the previous rank then
      // overlaps the MMA warpgroups' work on this tile instead of following it.
      if (lane == 0 && counter != nullptr) wait_for_rank(counter, rank);
      __syncwarp();
      named_barrier_sync(static_cast<uint32_t>(BwdBarrier::kDqFull0) + own_stage, kBarrierThreads);
      if (lane == 0) {
        if (counter != nullptr) fence_proxy_async_global();
        // Rank 0 stores: an ordered tile starts unzeroed (the preprocess zeroes
        // only for unordered adds; the conversion reads a tile nobody wrote as 0).
        const bool first = rank == 0;
        if constexpr (Traits::kDqInQStage) {
          for (int half = 0; half < 2; ++half)
            write_tile(first, tile + half * (Traits::kDqTileFloats / 2), smem.dq_over_stage(own_stage, half),
                       kTileBytes / 2);
        } else {
          write_tile(first, tile, smem.dq[own_stage], kTileBytes);
        }
        bulk_commit_group();
        bulk_wait_all_read();
        // The Q/dO stage under the tile goes back to the producer.
        if constexpr (Traits::kDqInQStage) cutlass::arch::ClusterBarrier::arrive(&smem.q_empty[own_stage]);
      }
      __syncwarp();
      if constexpr (!Traits::kDqInQStage) release_stage(own_stage);
      if (lane == 0) {
        if (counter != nullptr) {
          bulk_wait_all_complete();
          fence_proxy_async_global();
          release_increment(counter);
        }
        atomicAdd(&smem.dq_tasks_done, 1);
      }
    }
    // Unordered adds may still be in flight: complete them before the CTA exits.
    if (lane == 0) bulk_wait_all_complete();
    __syncwarp();
  }

  __device__ static void write_tile(bool first, float* dst, const float* src, uint32_t bytes) {
    if (first)
      bulk_store(dst, src, bytes);
    else
      bulk_reduce_add_f32(dst, src, bytes);
  }

  // Hands a stage back to both MMA warpgroups.
  __device__ static void release_stage(int stage) {
    for (int warpgroup = 0; warpgroup < Traits::kMmaWarpgroups; ++warpgroup)
      named_barrier_arrive(dq_empty_barrier(stage, warpgroup), kDqEmptyBarrierThreads);
  }
};

}  // namespace dash_attn::sm90::bwd
