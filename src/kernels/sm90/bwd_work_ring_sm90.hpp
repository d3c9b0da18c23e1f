// Work items from the producer's claims to the other warp roles: a ring of two
// shared-memory slots guarded by mbarriers.
//
// The producer claims item n+1 (one atomicAdd) as soon as it has issued the
// loads of item n, so the next chain's K, V and first Q, dO tiles load while
// the MMA warpgroups finish item n and write its dK, dV: there is no CTA-wide
// barrier between chains. A CTA then holds at most two claims and works them
// in claim order, which keeps schedules whose waits target earlier claims live
// (docs/backward.md, Liveness). Wave schedules also wait on later claims of
// their wave; for them the producer claims only after the previous item is
// released, the one-claim-at-a-time order the cooperative launch relies on.
#pragma once

#include <cutlass/arch/barrier.h>

#include "bwd_pipeline_state_sm90.hpp"

namespace dash_attn::sm90::bwd {

template <class Traits>
struct WorkRing {
  // Every MMA warp and the dQ writer warp release each item they read.
  static constexpr int kConsumerWarps = Traits::kMmaThreads / 32 + 1;

  typename Traits::SharedStorage& smem;
  PipelineState<2> state;

  __device__ static void init(typename Traits::SharedStorage& s) {
    for (int i = 0; i < 2; ++i) {
      cutlass::arch::ClusterBarrier::init(&s.work_full[i], 1);
      cutlass::arch::ClusterBarrier::init(&s.work_empty[i], kConsumerWarps);
    }
  }

  // Producer: hands claim `index` to the consumers (an index past the last
  // item tells them to stop) and returns the slot state it used.
  __device__ PipelineState<2> publish(int index) {
    const PipelineState<2> used = state;
    cutlass::arch::ClusterBarrier::wait(&smem.work_empty[used.stage], used.phase ^ 1);
    smem.work[used.stage] = index;
    cutlass::arch::ClusterBarrier::arrive(&smem.work_full[used.stage]);
    state.advance();
    return used;
  }

  // Producer: blocks until every consumer released the item published in `slot`.
  __device__ void wait_released(PipelineState<2> slot) {
    cutlass::arch::ClusterBarrier::wait(&smem.work_empty[slot.stage], slot.phase);
  }

  // Consumers: the next claimed index.
  __device__ int next() {
    cutlass::arch::ClusterBarrier::wait(&smem.work_full[state.stage], state.phase);
    return smem.work[state.stage];
  }

  // Consumers: done with the item next() returned; one lane per warp arrives.
  __device__ void release(bool elected_lane) {
    if (elected_lane) cutlass::arch::ClusterBarrier::arrive(&smem.work_empty[state.stage]);
    state.advance();
  }
};

}  // namespace dash_attn::sm90::bwd
