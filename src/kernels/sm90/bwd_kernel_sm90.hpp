// The sm90 backward main kernel: warp roles and the work loop.
//
// Work items are claimed in the schedule's order through an atomic counter: a
// CTA asks for the next item only after finishing its previous one. For
// atomic, fa3 and descending every reduction wait targets an item earlier in
// that order, hence one already claimed by a running CTA; by induction the
// earliest unfinished claimed item never waits, so the kernel is live for any
// grid and any number of SMs the hardware grants it. Wave schedules (shift,
// symmetric_shift) also wait on later members of their wave; the host
// launches them cooperatively with at least a wave of CTAs (docs/backward.md).
#pragma once

#include <cutlass/arch/reg_reconfig.h>

#include "bwd_dq_writer_sm90.hpp"
#include "bwd_epilogue_sm90.hpp"
#include "bwd_mainloop_sm90.hpp"
#include "bwd_producer_sm90.hpp"

namespace dash_attn::sm90::bwd {

enum class Role { kProducer, kDqWriter, kIdle, kMma };

template <class Traits>
__global__ void __launch_bounds__(Traits::kThreads, 1) bwd_main_kernel(const __grid_constant__ BwdParams<Traits> params) {
  using SharedStorage = typename Traits::SharedStorage;
  extern __shared__ __align__(1024) char smem_raw[];
  SharedStorage& smem = *reinterpret_cast<SharedStorage*>(smem_raw);

  const int warp = threadIdx.x / 32;
  // Warps 1 .. kDqStages drain one dQ stage each.
  const Role role = warp >= 4                    ? Role::kMma
                    : warp == 0                  ? Role::kProducer
                    : warp <= Traits::kDqStages  ? Role::kDqWriter
                                                 : Role::kIdle;

  if (threadIdx.x == 0) {
    for (int s = 0; s < Traits::kStages; ++s) {
      cutlass::arch::ClusterBarrier::init(&smem.q_full[s], 1);
      cutlass::arch::ClusterBarrier::init(&smem.dout_full[s], 1);
      // Every MMA thread releases a Q stage, and with kDqInQStage its dQ writer too.
      cutlass::arch::ClusterBarrier::init(&smem.q_empty[s], Traits::kMmaThreads + (Traits::kDqInQStage ? 1 : 0));
      cutlass::arch::ClusterBarrier::init(&smem.dout_empty[s], Traits::kMmaThreads / 32);
    }
    cutlass::arch::ClusterBarrier::init(&smem.kv_full, 1);
    cute::prefetch_tma_descriptor(params.tma_q.get_tma_descriptor());
    cute::prefetch_tma_descriptor(params.tma_dout.get_tma_descriptor());
    cute::prefetch_tma_descriptor(params.tma_k.get_tma_descriptor());
    cute::prefetch_tma_descriptor(params.tma_v.get_tma_descriptor());
  }
  cutlass::arch::fence_barrier_init();
  __syncthreads();

  // Claims the next work item; every thread of the CTA returns the same index.
  auto claim = [&]() {
    if (threadIdx.x == 0) smem.work = atomicAdd(params.work_counter, 1);
    __syncthreads();
    return smem.work;
  };
  // Runs chain_fn on every chain of every item this CTA claims. The barrier
  // after each chain makes K/V shared memory and smem.work reusable.
  auto for_each_chain = [&](auto chain_fn) {
    for (int index = claim(); index < params.total_items; index = claim()) {
      const schedule::WorkItem item = params.schedule.work_item(params.problem, index);
      // Constant indices into item.kv keep the item in registers.
      chain_fn(ChainWork{item.batch, item.head_q, item.head_kv, item.kv[0], item.tiles});
      __syncthreads();
      if (item.num_chains > 1) {
        chain_fn(ChainWork{item.batch, item.head_q, item.head_kv, item.kv[1], item.tiles});
        __syncthreads();
      }
    }
  };

  if (role != Role::kMma) {
    cutlass::arch::warpgroup_reg_dealloc<Traits::kProducerRegisters>();
    BwdProducer<Traits> producer{params, smem};
    DqWriter<Traits> writer{params, smem, static_cast<int>(threadIdx.x % 32), warp - 1};
    if (role == Role::kDqWriter) writer.start();
    for_each_chain([&](const ChainWork& work) {
      if (role == Role::kProducer && threadIdx.x == 0) producer.run_chain(work);
      if (role == Role::kDqWriter) writer.run_chain(work);
    });
    if (role == Role::kDqWriter) writer.finish();
  } else {
    cutlass::arch::warpgroup_reg_alloc<Traits::kMmaRegisters>();
    const int thread = threadIdx.x - 128;
    BwdMainloop<Traits> mainloop{params, smem, thread};
    BwdEpilogue<Traits> epilogue{params, smem, thread};
    typename Traits::TiledMmaDkv mma_dkv;
    Tensor dk = partition_fragment_C(mma_dkv, Shape<Int<Traits::kBlockN>, Int<Traits::kHeadDim>>{});
    Tensor dv = partition_fragment_C(mma_dkv, Shape<Int<Traits::kBlockN>, Int<Traits::kHeadDim>>{});
    uint32_t kv_phase = 0;
    for_each_chain([&](const ChainWork& work) {
      mainloop.run_chain(work, kv_phase, dk, dv);
      epilogue.store(work, dk, dv);
      kv_phase ^= 1;
    });
  }
}

}  // namespace dash_attn::sm90::bwd
