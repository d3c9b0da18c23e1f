// The dQ writer warp: adds each partial dQ tile the MMA warpgroups leave in
// shared memory into the fp32 accumulator with one TMA bulk reduce-add.
// Deterministic mode follows the contract: one lane acquire-spins until the
// tile's counter equals this contribution's rank, adds, waits until the add
// has completed in global memory, then releases (fence + increment). The
// shared stage is handed back as soon as the engine has read it, so the MMA
// warpgroups compute the next Q tile while the completion wait runs here.
#pragma once

#include "bwd_params_sm90.hpp"
#include "bwd_sync_sm90.hpp"

namespace dash_attn::sm90::bwd {

template <class Traits>
struct DqWriter {
  static constexpr uint32_t kBarrierThreads = Traits::kMmaThreads + 32;
  static constexpr uint32_t kTileBytes = Traits::kDqTileFloats * sizeof(float);

  const BwdParams<Traits>& params;
  typename Traits::SharedStorage& smem;
  int lane;
  int dq_stage = 0;

  // Both stages start empty.
  __device__ void start() {
    named_barrier_arrive(static_cast<uint32_t>(NamedBarrier::kDqEmpty0), kBarrierThreads);
    named_barrier_arrive(static_cast<uint32_t>(NamedBarrier::kDqEmpty1), kBarrierThreads);
  }

  // When the schedule's waits target earlier claims only, the release of a
  // tile is deferred until the next tile's add is issued, so the wait for one
  // add's completion overlaps the acquire of the next. Safe within a chain:
  // the contribution the next acquire waits for belongs to an earlier claim,
  // which never waits on this chain. Flushed at the end of the chain, since a
  // later chain of this CTA may wait on one that waits on this release.
  // Wave schedules wait on later claims in a ring: they release at once.
  __device__ void run_chain(const ChainWork& work) {
    const int64_t head_tiles =
        (static_cast<int64_t>(work.batch) * params.problem.heads_q + work.head_q) * work.tiles.q_tiles();
    int* pending = nullptr;  // counter whose release waits for the previous add's completion
    for (auto cursor = params.schedule.chain(work.tiles, work.kv); cursor.valid(); cursor.advance()) {
      const int q_tile = cursor.q_tile();
      const int rank = cursor.rank();
      named_barrier_sync(static_cast<uint32_t>(NamedBarrier::kDqFull0) + dq_stage, kBarrierThreads);
      int* counter = rank != schedule::kUnordered ? params.dq_counters + head_tiles + q_tile : nullptr;
      if (lane == 0) {
        if (counter != nullptr) {
          wait_for_rank(counter, rank);
          fence_proxy_async_global();
        }
        bulk_reduce_add_f32(params.dq_accum + (head_tiles + q_tile) * Traits::kDqTileFloats, smem.dq[dq_stage],
                            kTileBytes);
        bulk_commit_group();
        bulk_wait_all_read();
      }
      __syncwarp();
      named_barrier_arrive(static_cast<uint32_t>(NamedBarrier::kDqEmpty0) + dq_stage, kBarrierThreads);
      if (lane == 0 && counter != nullptr) {
        if (params.waits_target_earlier_claims) {
          if (pending != nullptr) release_after(pending, bulk_wait_all_but_last_complete);
          pending = counter;
        } else {
          release_after(counter, bulk_wait_all_complete);
        }
      }
      dq_stage ^= 1;
    }
    if (lane == 0 && pending != nullptr) release_after(pending, bulk_wait_all_complete);
  }

  // Publishes an add once the bulk engine has completed it in global memory.
  template <class WaitFn>
  __device__ static void release_after(int* counter, WaitFn wait_complete) {
    wait_complete();
    fence_proxy_async_global();
    release_increment(counter);
  }

  // Unordered adds may still be in flight: complete them before the CTA exits.
  __device__ void finish() {
    if (lane == 0) bulk_wait_all_complete();
    __syncwarp();
  }
};

}  // namespace dash_attn::sm90::bwd
