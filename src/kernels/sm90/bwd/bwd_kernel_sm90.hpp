// The sm90 backward main kernel: warp roles and how work flows between them.
//
// Work items are claimed in the schedule's order through an atomic counter,
// by the producer warp alone, which publishes their chains to the MMA
// warpgroups (a ring of two in shared memory) and each step's dQ task to the
// dQ writers; no role waits for a CTA-wide barrier between chains. Liveness:
// for atomic, fa3 and descending every reduction wait targets an item earlier
// in claim order; a CTA claims at most one item ahead of the one it works on
// and works on its items in claim order, so the earliest unfinished claimed
// item is being worked on and waits for nobody unfinished: the kernel is live
// for any grid and any number of SMs the hardware grants it. Wave schedules
// (shift, symmetric_shift) also wait on later members of their wave; the host
// launches them cooperatively with at least a wave of CTAs, and their
// producer claims only when its CTA has finished all earlier work
// (bwd_producer_sm90.hpp, docs/backward.md).
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
      for (int slot = 0; slot < 2; ++slot) {
        cutlass::arch::ClusterBarrier::init(&smem.dq_task_full[s][slot], 1);
        cutlass::arch::ClusterBarrier::init(&smem.dq_task_empty[s][slot], 32);
      }
    }
    for (int slot = 0; slot < 2; ++slot) {
      cutlass::arch::ClusterBarrier::init(&smem.chain_full[slot], 1);
      cutlass::arch::ClusterBarrier::init(&smem.chain_empty[slot], Traits::kMmaThreads);
    }
    cutlass::arch::ClusterBarrier::init(&smem.kv_full, 1);
    cutlass::arch::ClusterBarrier::init(&smem.kv_empty, Traits::kMmaThreads);
    smem.dq_tasks_done = 0;
    cute::prefetch_tma_descriptor(params.tma_q.get_tma_descriptor());
    cute::prefetch_tma_descriptor(params.tma_dout.get_tma_descriptor());
    cute::prefetch_tma_descriptor(params.tma_k.get_tma_descriptor());
    cute::prefetch_tma_descriptor(params.tma_v.get_tma_descriptor());
  }
  cutlass::arch::fence_barrier_init();
  __syncthreads();

  if (role != Role::kMma) {
    cutlass::arch::warpgroup_reg_dealloc<Traits::kProducerRegisters>();
    if (role == Role::kProducer) {
      if (params.varlen)
        BwdProducer<Traits>{params, smem}.run_varlen();
      else if (threadIdx.x == 0)
        BwdProducer<Traits>{params, smem}.run();
    }
    if (role == Role::kDqWriter) DqWriter<Traits>{params, smem, static_cast<int>(threadIdx.x % 32), warp - 1}.run();
  } else {
    cutlass::arch::warpgroup_reg_alloc<Traits::kMmaRegisters>();
    const int thread = threadIdx.x - 128;
    BwdMainloop<Traits> mainloop{params, smem, thread};
    BwdEpilogue<Traits> epilogue{params, smem, thread};
    typename Traits::TiledMmaDkv mma_dkv;
    Tensor dk = partition_fragment_C(mma_dkv, Shape<Int<Traits::kBlockN>, Int<Traits::kHeadDim>>{});
    Tensor dv = partition_fragment_C(mma_dkv, Shape<Int<Traits::kBlockN>, Int<Traits::kHeadDim>>{});
    cutlass::PipelineState<2> chain_slot;
    for (uint32_t kv_phase = 0;; kv_phase ^= 1) {
      cutlass::arch::ClusterBarrier::wait(&smem.chain_full[chain_slot.index()], chain_slot.phase());
      const ChainWork work = smem.chains[chain_slot.index()];
      if (work.done()) break;
      mainloop.run_chain(work, kv_phase, dk, dv);
      epilogue.store(work, dk, dv, mainloop.dkv_staging(params.dk_accum == nullptr && epilogue.stores_by_tma(work)));
      // Every thread read the slot: each releases it (as for the Q stages).
      cutlass::arch::ClusterBarrier::arrive(&smem.chain_empty[chain_slot.index()]);
      ++chain_slot;
    }
    mainloop.finish();
  }
}

}  // namespace dash_attn::sm90::bwd
