// The dQ writer warp: adds each partial dQ tile the MMA warpgroups leave in
// shared memory into the fp32 accumulator with TMA bulk reduce-adds, one per
// chunk of the tile (kBackwardDqChunks). Deterministic mode follows the
// contract per chunk: one lane acquire-spins until the chunk's counter equals
// this contribution's rank, adds, and once the add has completed in global
// memory releases the counter (fence + increment); the next rank can start on
// the first chunk while the later ones are in flight. The shared stage is
// handed back as soon as the engine has read it, so the MMA warpgroups
// compute the next Q tile while the completion waits run here.
#pragma once

#include "bwd_params_sm90.hpp"
#include "bwd_sync_sm90.hpp"

namespace dash_attn::sm90::bwd {

template <class Traits>
struct DqWriter {
  static constexpr uint32_t kBarrierThreads = Traits::kMmaThreads + 32;
  static constexpr int kChunks = kBackwardDqChunks;
  static constexpr int kChunkFloats = Traits::kDqTileFloats / kChunks;
  static_assert(Traits::kDqTileFloats % (kChunks * 4) == 0, "chunks of whole 16-byte vectors");

  const BwdParams<Traits>& params;
  typename Traits::SharedStorage& smem;
  int lane;
  int dq_stage = 0;

  // Both stages start empty.
  __device__ void start() {
    for (int stage = 0; stage < Traits::kDqStages; ++stage) release_stage(stage);
  }

  __device__ void run_chain(const ChainWork& work) {
    const int64_t head_tiles =
        (static_cast<int64_t>(work.batch) * params.problem.heads_q + work.head_q) * work.tiles.q_tiles();
    for (auto cursor = params.schedule.chain(work.tiles, work.kv); cursor.valid(); cursor.advance()) {
      const int q_tile = cursor.q_tile();
      const int rank = cursor.rank();
      int* counters = rank != schedule::kUnordered ? params.dq_counters + (head_tiles + q_tile) * kChunks : nullptr;
      // Acquire before the tile is ready: the wait for the previous rank then
      // overlaps the MMA warpgroups' work on this tile instead of following it.
      if (lane == 0 && counters != nullptr) wait_for_rank(counters, rank);
      __syncwarp();
      named_barrier_sync(static_cast<uint32_t>(NamedBarrier::kDqFull0) + dq_stage, kBarrierThreads);
      if (lane == 0) {
        float* accum = params.dq_accum + (head_tiles + q_tile) * Traits::kDqTileFloats;
        CUTE_UNROLL
        for (int c = 0; c < kChunks; ++c) {
          if (counters != nullptr) {
            if (c > 0) wait_for_rank(counters + c, rank);
            fence_proxy_async_global();
          }
          bulk_reduce_add_f32(accum + c * kChunkFloats, smem.dq[dq_stage] + c * kChunkFloats, kChunkFloats * sizeof(float));
          bulk_commit_group();
        }
        bulk_wait_all_read();
      }
      __syncwarp();
      release_stage(dq_stage);
      if (lane == 0 && counters != nullptr) release_in_order<0>(counters);
      dq_stage ^= 1;
    }
  }

  // Releases each chunk's counter as soon as its add has completed in global
  // memory (one bulk group per chunk, completing in commit order). Every
  // chunk is issued before the first release, so a release may wait on the
  // previous rank's release of a later chunk of the same tile: lower ranks
  // never wait on higher ones, so this adds no cycle.
  template <int kChunk>
  __device__ static void release_in_order(int* counters) {
    bulk_wait_complete<kChunks - 1 - kChunk>();
    fence_proxy_async_global();
    release_increment(counters + kChunk);
    if constexpr (kChunk + 1 < kChunks) release_in_order<kChunk + 1>(counters);
  }

  // Hands a stage back to both MMA warpgroups.
  __device__ static void release_stage(int stage) {
    for (int warpgroup = 0; warpgroup < Traits::kMmaWarpgroups; ++warpgroup)
      named_barrier_arrive(dq_empty_barrier(stage, warpgroup), kDqEmptyBarrierThreads);
  }

  // Unordered adds may still be in flight: complete them before the CTA exits.
  __device__ void finish() {
    if (lane == 0) bulk_wait_all_complete();
    __syncwarp();
  }
};

}  // namespace dash_attn::sm90::bwd
