// The sm90 backward main kernel: warp roles and the work loop.
//
// Work items are claimed in the schedule's order through an atomic counter by
// the producer, which hands them to the other roles through a WorkRing and
// claims the next item while the current one finishes (bwd_work_ring_sm90.hpp).
// A CTA works its claims in claim order. For atomic, fa3 and descending every
// reduction wait targets an item earlier in that order, hence one claimed by
// a running CTA; by induction the earliest unfinished claimed item never
// waits, so the kernel is live for any grid and any number of SMs the hardware
// grants it. Wave schedules (shift, symmetric_shift) also wait on later
// members of their wave; the host launches them cooperatively with at least a
// wave of CTAs and the producer claims one item at a time (docs/backward.md).
#pragma once

#include <cutlass/arch/reg_reconfig.h>

#include "bwd_dq_writer_sm90.hpp"
#include "bwd_epilogue_sm90.hpp"
#include "bwd_mainloop_sm90.hpp"
#include "bwd_producer_sm90.hpp"
#include "bwd_work_ring_sm90.hpp"

namespace dash_attn::sm90::bwd {

enum class Role { kProducer, kDqWriter, kIdle, kMma };

// Runs chain_fn on every chain of every item the ring hands out, then
// releases the item; stops at the first index past the last item.
template <class Traits, class ChainFn>
__device__ void for_each_claimed_chain(const BwdParams<Traits>& params, WorkRing<Traits>& ring, bool elected_lane,
                                       ChainFn chain_fn) {
  for (int index = ring.next(); index < params.total_items; index = ring.next()) {
    const schedule::WorkItem item = params.schedule.work_item(params.problem, index);
    // One call site keeps one copy of each role's chain code (instruction
    // cache); selecting with constant indices keeps item.kv in registers.
    for (int c = 0; c < item.num_chains; ++c)
      chain_fn(ChainWork{item.batch, item.head_q, item.head_kv, c == 0 ? item.kv[0] : item.kv[1], item.tiles});
    ring.release(elected_lane);
  }
}

template <class Traits>
__global__ void __launch_bounds__(Traits::kThreads, 1) bwd_main_kernel(const __grid_constant__ BwdParams<Traits> params) {
  using SharedStorage = typename Traits::SharedStorage;
  extern __shared__ __align__(1024) char smem_raw[];
  SharedStorage& smem = *reinterpret_cast<SharedStorage*>(smem_raw);

  const int warp = threadIdx.x / 32;
  const int lane = threadIdx.x % 32;
  const Role role = warp >= 4 ? Role::kMma : warp == 0 ? Role::kProducer : warp == 1 ? Role::kDqWriter : Role::kIdle;

  if (threadIdx.x == 0) {
    for (int s = 0; s < Traits::kStages; ++s) {
      cutlass::arch::ClusterBarrier::init(&smem.q_full[s], 1);
      cutlass::arch::ClusterBarrier::init(&smem.dout_full[s], 1);
      cutlass::arch::ClusterBarrier::init(&smem.q_empty[s], Traits::kMmaThreads / 32);
      cutlass::arch::ClusterBarrier::init(&smem.dout_empty[s], Traits::kMmaThreads / 32);
    }
    cutlass::arch::ClusterBarrier::init(&smem.kv_full, 1);
    cutlass::arch::ClusterBarrier::init(&smem.kv_empty, Traits::kMmaThreads / 32);
    WorkRing<Traits>::init(smem);
    cute::prefetch_tma_descriptor(params.tma_q.get_tma_descriptor());
    cute::prefetch_tma_descriptor(params.tma_dout.get_tma_descriptor());
    cute::prefetch_tma_descriptor(params.tma_k.get_tma_descriptor());
    cute::prefetch_tma_descriptor(params.tma_v.get_tma_descriptor());
  }
  cutlass::arch::fence_barrier_init();
  __syncthreads();

  WorkRing<Traits> ring{smem};
  if (role != Role::kMma) {
    cutlass::arch::warpgroup_reg_dealloc<Traits::kProducerRegisters>();
    if (role == Role::kProducer && lane == 0) {
      BwdProducer<Traits> producer{params, smem};
      for (;;) {
        const int index = atomicAdd(params.work_counter, 1);
        const PipelineState<2> slot = ring.publish(index);
        if (index >= params.total_items) break;
        const schedule::WorkItem item = params.schedule.work_item(params.problem, index);
        for (int c = 0; c < item.num_chains; ++c)
          producer.run_chain(ChainWork{item.batch, item.head_q, item.head_kv, c == 0 ? item.kv[0] : item.kv[1], item.tiles});
        if (!params.waits_target_earlier_claims) ring.wait_released(slot);
      }
    }
    if (role == Role::kDqWriter) {
      DqWriter<Traits> writer{params, smem, lane};
      writer.start();
      for_each_claimed_chain(params, ring, lane == 0, [&](const ChainWork& work) { writer.run_chain(work); });
      writer.finish();
    }
  } else {
    cutlass::arch::warpgroup_reg_alloc<Traits::kMmaRegisters>();
    const int thread = threadIdx.x - 128;
    BwdMainloop<Traits> mainloop{params, smem, thread};
    BwdEpilogue<Traits> epilogue{params, thread};
    typename Traits::TiledMmaDkv mma_dkv;
    Tensor dk = partition_fragment_C(mma_dkv, Shape<Int<Traits::kBlockN>, Int<Traits::kHeadDim>>{});
    Tensor dv = partition_fragment_C(mma_dkv, Shape<Int<Traits::kBlockN>, Int<Traits::kHeadDim>>{});
    uint32_t kv_phase = 0;
    for_each_claimed_chain(params, ring, lane == 0, [&](const ChainWork& work) {
      mainloop.run_chain(work, kv_phase, dk, dv);
      epilogue.store(work, dk, dv);
      kv_phase ^= 1;
    });
  }
}

}  // namespace dash_attn::sm90::bwd
