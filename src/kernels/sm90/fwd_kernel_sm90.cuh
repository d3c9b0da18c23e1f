// Forward kernel: warp roles, shared storage and the persistent tile loop.
//
//   warpgroup 0  producer: one thread issues every TMA load (Q per tile, K and V
//                per key tile through two-stage mbarrier pipelines); the
//                warpgroup gives its registers away (setmaxnreg 24).
//   warpgroups 1, 2  consumers (setmaxnreg 240): rows 0-63 and 64-127 of the
//                query tile; wgmma, online softmax, epilogue.
// Every CTA walks the same static tile order (host::ForwardPlan), so the
// producer and the consumers agree on the work without talking.
#pragma once

#include <cutlass/arch/reg_reconfig.h>

#include "fwd_epilogue_sm90.cuh"
#include "fwd_mainloop_sm90.cuh"

namespace dash_attn::sm90 {

template <class Traits>
class FwdKernelSm90 {
 public:
  using Mainloop = FwdMainloopSm90<Traits>;
  using Epilogue = FwdEpilogueSm90<Traits>;
  using SharedStorage = typename Traits::SharedStorage;
  static constexpr int kThreads = Traits::kThreads;
  static constexpr int kSharedBytes = Traits::kSharedBytes;

  struct Params {
    typename Mainloop::Params mainloop;
    typename Epilogue::Params epilogue;
    host::ForwardPlan plan;
  };

  CUTE_DEVICE void operator()(Params const& params, char* smem_bytes) const {
    using namespace cute;
    using PipelineQ = typename Traits::PipelineQ;
    using PipelineKV = typename Traits::PipelineKV;
    auto& smem = *reinterpret_cast<SharedStorage*>(smem_bytes);
    const int warp_group = cutlass::canonical_warp_group_idx();
    const bool is_producer = warp_group == 0;
    const bool is_leader = is_producer && threadIdx.x == 0;
    host::ForwardPlan const& plan = params.plan;

    if (threadIdx.x == 0) Mainloop::prefetch_descriptors(params.mainloop);

    using Role = typename PipelineKV::ThreadCategory;
    typename PipelineQ::Params pq{};
    pq.transaction_bytes = Traits::kQBytes;
    pq.role = is_producer ? PipelineQ::ThreadCategory::Producer : PipelineQ::ThreadCategory::Consumer;
    pq.is_leader = is_leader;
    pq.num_consumers = Traits::kConsumerThreads;
    typename PipelineKV::Params pkv{};
    pkv.transaction_bytes = Traits::kKVBytes;
    pkv.role = is_producer ? Role::Producer : Role::Consumer;
    pkv.is_leader = is_leader;
    pkv.num_consumers = Traits::kConsumerThreads;
    // The constructors initialise the barriers (warp 0); the CTA-wide sync
    // below publishes them before anyone waits.
    PipelineQ pipeline_q(smem.pipeline_q, pq, Shape<_1, _1, _1>{});
    PipelineKV pipeline_k(smem.pipeline_k, pkv, Shape<_1, _1, _1>{});
    PipelineKV pipeline_v(smem.pipeline_v, pkv, Shape<_1, _1, _1>{});
    __syncthreads();

    if (is_producer) {
      cutlass::arch::warpgroup_reg_dealloc<Traits::kProducerRegisters>();
      if (threadIdx.x != 0) return;
      auto state_q = cutlass::make_producer_start_state<PipelineQ>();
      auto state_k = cutlass::make_producer_start_state<PipelineKV>();
      auto state_v = cutlass::make_producer_start_state<PipelineKV>();
      for (int index = blockIdx.x; index < plan.tiles; index += gridDim.x) {
        const host::ForwardWorkTile work = plan.work_tile(index);
        const int n_block_end = plan.n_block_end(work.m_block);
        if (n_block_end == 0) continue;
        Mainloop::load(params.mainloop, smem, pipeline_q, pipeline_k, pipeline_v, state_q, state_k, state_v, work,
                       n_block_end);
      }
    } else {
      cutlass::arch::warpgroup_reg_alloc<Traits::kConsumerRegisters>();
      const int thread_idx = threadIdx.x - 128;
      const int consumer_wg = thread_idx / 128;
      cutlass::PipelineState<1> state_q;
      cutlass::PipelineState<Traits::kStages> state_k, state_v;
      typename Traits::TiledMmaPV mma_pv;
      Tensor tOrO = partition_fragment_C(mma_pv, Shape<Int<Traits::kBlockM>, Int<Traits::kHeadDim>>{});
      OnlineSoftmax<2> softmax(params.mainloop.scale_log2);
      // Consumer warpgroup 0 takes the first GEMM turn.
      if (consumer_wg == 1) Mainloop::pass_turn(consumer_wg);
      for (int index = blockIdx.x; index < plan.tiles; index += gridDim.x) {
        const host::ForwardWorkTile work = plan.work_tile(index);
        const int n_block_end = plan.n_block_end(work.m_block);
        clear(tOrO);
        softmax.reset();
        if (n_block_end > 0)
          Mainloop::mma(params.mainloop, plan, smem, pipeline_q, pipeline_k, pipeline_v, state_q, state_k, state_v,
                        thread_idx, work, n_block_end, tOrO, softmax);
        Epilogue::store(params.epilogue, plan, thread_idx, work, tOrO, softmax);
      }
    }
  }
};

template <class Kernel>
__global__ void __launch_bounds__(Kernel::kThreads, 1) fwd_kernel_sm90(CUTE_GRID_CONSTANT typename Kernel::Params const params) {
  extern __shared__ __align__(1024) char smem[];
  Kernel{}(params, smem);
}

}  // namespace dash_attn::sm90
