// Forward kernel: warp roles, shared storage and the persistent tile loop.
//
//   warpgroup 0  producer: one thread issues every TMA load (Q per tile, K and V
//                per key tile through two-stage mbarrier pipelines); the
//                warpgroup gives its registers away (setmaxnreg 24, or 32
//                beside three consumers).
//   warpgroups 1..  consumers (setmaxnreg 240, or 160 with three): 64 rows
//                each of the query tile; wgmma, online softmax, epilogue.
// Tiles come from the one order of schedule::ForwardPlan; a CTA starts with tile
// blockIdx.x and then claims the next index from a global counter (dynamic
// persistent scheduling). The producer thread claims while it waits to load
// its current tile's last key tile, and once those loads are issued hands the
// index to the consumers through shared memory and two mbarriers, so both
// roles walk the same tiles.
#pragma once

#include <cutlass/arch/reg_reconfig.h>

#include <type_traits>

#include "fwd_epilogue_sm90.hpp"
#include "fwd_mainloop_sm90.hpp"
#include "kernels/sm90/common/sequence_scan_sm90.hpp"

namespace dash_attn::sm90::fwd {

// Warp-collective: the varlen tile of index `index` (sequence_scan_sm90.hpp),
// or end_of_work() when the batch has fewer tiles; tile: the kernel's.
CUTE_DEVICE schedule::VarlenForwardWork find_varlen_tile(const schedule::VarlenForwardTiles& tiles, TileShape tile,
                                                         SequenceCursor& cursor, int index) {
  const SequenceIndex at = find_sequence(tiles.batch, [&](int s) { return tiles.tiles_of(s, tile); }, cursor, index);
  return at.sequence < tiles.batch ? tiles.work(at.sequence, at.local, tile) : tiles.end_of_work();
}

// CUTLASS's mbarrier asm has no memory clobber; this keeps the compiler from
// moving the shared next_tile access across the arrive / wait around it (the
// mbarrier's own release / acquire semantics order it for the hardware).
CUTE_DEVICE void compiler_fence() { asm volatile("" ::: "memory"); }

// Tiles: schedule::ForwardPlan (fixed-length batches) or
// schedule::VarlenForwardTiles (varlen; its producer keeps a whole warp to
// find the tiles and hands the consumers the decoded tile instead of its index).
template <class Traits_, class Tiles = schedule::ForwardPlan>
class FwdKernelSm90 {
 public:
  using Traits = Traits_;
  using Mainloop = FwdMainloopSm90<Traits>;
  using Epilogue = FwdEpilogueSm90<Traits>;
  static constexpr bool kVarlen = std::is_same_v<Tiles, schedule::VarlenForwardTiles>;
  // The tile as a constant for the varlen tile queries (the launch checked the plan's).
  static constexpr TileShape kTile{Traits::kBlockM, Traits::kBlockN};
  using HandOff = std::conditional_t<kVarlen, schedule::VarlenForwardWork, int>;
  using SharedStorage = typename Traits::template SharedStorageFor<HandOff>;
  static constexpr int kThreads = Traits::kThreads;
  static constexpr int kSharedBytes = sizeof(SharedStorage);
  static_assert(kSharedBytes <= 227 * 1024, "forward tiles exceed the 227 KB of shared memory of an SM");

  struct Params {
    typename Mainloop::Params mainloop;
    typename Epilogue::Params epilogue;
    Tiles plan;
    // Claim counter, zero at launch and zeroed again by the last claim; null:
    // the static order cta, cta + grid, ...
    int* tile_counter;
  };

  CUTE_DEVICE void operator()(Params const& params, char* smem_bytes) const {
    using namespace cute;
    using PipelineQ = typename Traits::PipelineQ;
    using PipelineKV = typename Traits::PipelineKV;
    auto& smem = *reinterpret_cast<SharedStorage*>(smem_bytes);
    const int warp_group = cutlass::canonical_warp_group_idx();
    const bool is_producer = warp_group == 0;
    const bool is_leader = is_producer && threadIdx.x == 0;
    Tiles const& plan = params.plan;

    if (threadIdx.x == 0) {
      Mainloop::prefetch_descriptors(params.mainloop);
      Epilogue::prefetch_descriptor(params.epilogue);
    }

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
    if (threadIdx.x == 0) {
      cutlass::arch::ClusterBarrier::init(&smem.tile_full, 1);
      cutlass::arch::ClusterBarrier::init(&smem.tile_empty, Traits::kConsumerThreads);
      cutlass::arch::fence_barrier_init();
    }
    __syncthreads();

    if (is_producer) {
      if constexpr (kVarlen) {
        cutlass::arch::warpgroup_reg_dealloc<Traits::kProducerRegisters>();
        if (threadIdx.x >= 32) return;
        produce_varlen(params, smem, pipeline_q, pipeline_k, pipeline_v);
      } else {
        cutlass::arch::warpgroup_reg_dealloc<Traits::kProducerRegisters>();
        if (threadIdx.x != 0) return;
        auto state_q = cutlass::make_producer_start_state<PipelineQ>();
        auto state_kv = cutlass::make_producer_start_state<PipelineKV>();
        uint32_t empty_phase = 1;  // the slot starts empty
        for (int index = plan.first_tile(blockIdx.x); index < plan.tiles;) {
          const schedule::ForwardWorkTile work = plan.work_tile(index);
          const int n_block_begin = plan.n_block_begin(work.m_block), n_block_end = plan.n_block_end(work.m_block);
          int claim = 0;
          auto claim_next = [&] {
            if (params.tile_counter != nullptr) claim = atomicAdd(params.tile_counter, 1);
          };
          if (n_block_end > n_block_begin)
            Mainloop::load(params.mainloop, smem, pipeline_q, pipeline_k, pipeline_v, state_q, state_kv, work,
                           n_block_begin, n_block_end, claim_next);
          else
            claim_next();
          if (params.tile_counter != nullptr) {
            if (plan.is_last_claim(claim)) atomicExch(params.tile_counter, 0);
            index = plan.claimed_tile(claim);
          } else {
            index = plan.static_next_tile(index);
          }
          hand_off(smem, empty_phase, index);
        }
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
      if (consumer_wg == Traits::kConsumerWarpgroups - 1) Mainloop::pass_turn(consumer_wg);
      uint32_t full_phase = 0;
      if constexpr (kVarlen) {
        // Each consumer warp finds its CTA's first tile itself (blockIdx.x
        // tiles in: a few scan steps); the producer hands over the rest.
        SequenceCursor cursor;
        schedule::VarlenForwardWork work = find_varlen_tile(plan, kTile, cursor, plan.first_tile(blockIdx.x));
        while (!plan.done(work)) {
          const schedule::VarlenTileMasks masks{&plan, work, kTile};
          const mask::MaskGeometry geometry = masks.mask_geometry();
          const int n_block_begin = geometry.kv_begin(work.m_block), n_block_end = geometry.kv_end(work.m_block);
          clear(tOrO);
          softmax.reset();
          if (n_block_end > n_block_begin)
            Mainloop::mma(params.mainloop, masks, smem, pipeline_q, pipeline_k, pipeline_v, state_q, state_k, state_v,
                          thread_idx, work, n_block_begin, n_block_end, tOrO, softmax);
          Epilogue::store(params.epilogue, masks, thread_idx, work, tOrO, softmax, smem.o.data());
          work = take_hand_off(smem, full_phase);
        }
        Epilogue::finish(thread_idx);
      } else {
        // The same steps as the varlen loop, written out: as one lambda for
        // both loops this kernel compiles to other SASS (944 of 6194 lines of
        // the hdim 128 unit) than the form the H200 tests and A/B measured.
        for (int index = plan.first_tile(blockIdx.x); index < plan.tiles;) {
          const schedule::ForwardWorkTile work = plan.work_tile(index);
          const int n_block_begin = plan.n_block_begin(work.m_block), n_block_end = plan.n_block_end(work.m_block);
          clear(tOrO);
          softmax.reset();
          if (n_block_end > n_block_begin)
            Mainloop::mma(params.mainloop, plan, smem, pipeline_q, pipeline_k, pipeline_v, state_q, state_k, state_v,
                          thread_idx, work, n_block_begin, n_block_end, tOrO, softmax);
          Epilogue::store(params.epilogue, plan, thread_idx, work, tOrO, softmax, smem.o.data());
          index = take_hand_off(smem, full_phase);
        }
        Epilogue::finish(thread_idx);
      }
    }
  }

 private:
  // Producer: publishes the next tile once the consumers have read the last one.
  static CUTE_DEVICE void hand_off(SharedStorage& smem, uint32_t& empty_phase, HandOff const& next) {
    cutlass::arch::ClusterBarrier::wait(&smem.tile_empty, empty_phase);
    empty_phase ^= 1;
    compiler_fence();
    smem.next_tile = next;
    compiler_fence();
    cutlass::arch::ClusterBarrier::arrive(&smem.tile_full);  // release: the consumers see next_tile
  }
  // Consumers: the tile the producer published, after which the slot is free again.
  static CUTE_DEVICE HandOff take_hand_off(SharedStorage& smem, uint32_t& full_phase) {
    cutlass::arch::ClusterBarrier::wait(&smem.tile_full, full_phase);
    full_phase ^= 1;
    compiler_fence();
    const HandOff next = smem.next_tile;
    compiler_fence();
    cutlass::arch::ClusterBarrier::arrive(&smem.tile_empty);
    return next;
  }

  // Varlen producer: warp 0 of the producer warpgroup finds every tile, lane
  // 0 issues the loads, claims and hands off; the claim that finds the batch
  // exhausted knows its tile count and so whether it is the launch's last.
  template <class PipelineQ, class PipelineKV>
  static CUTE_DEVICE void produce_varlen(Params const& params, SharedStorage& smem, PipelineQ& pipeline_q,
                                         PipelineKV& pipeline_k, PipelineKV& pipeline_v) {
    Tiles const& plan = params.plan;
    const bool lane0 = threadIdx.x == 0;
    auto state_q = cutlass::make_producer_start_state<PipelineQ>();
    auto state_kv = cutlass::make_producer_start_state<PipelineKV>();
    uint32_t empty_phase = 1;  // the slot starts empty
    SequenceCursor cursor;
    int index = plan.first_tile(blockIdx.x);
    schedule::VarlenForwardWork work = find_varlen_tile(plan, kTile, cursor, index);
    while (!plan.done(work)) {
      const mask::MaskGeometry geometry = plan.mask_geometry(work, kTile);
      const int n_block_begin = geometry.kv_begin(work.m_block), n_block_end = geometry.kv_end(work.m_block);
      int claim = 0;
      auto claim_next = [&] {
        if (params.tile_counter != nullptr) claim = atomicAdd(params.tile_counter, 1);
      };
      if (lane0) {
        if (n_block_end > n_block_begin)
          Mainloop::load(params.mainloop, smem, pipeline_q, pipeline_k, pipeline_v, state_q, state_kv, work,
                         n_block_begin, n_block_end, claim_next);
        else
          claim_next();
      }
      if (params.tile_counter != nullptr) {
        claim = __shfl_sync(0xffffffffu, claim, 0);
        index = plan.claimed_tile(claim);
      } else {
        index = plan.static_next_tile(index);
      }
      work = find_varlen_tile(plan, kTile, cursor, index);
      if (lane0) {
        if (params.tile_counter != nullptr && plan.done(work) &&
            Tiles::is_last_claim(claim, cursor.window_first, plan.grid))
          atomicExch(params.tile_counter, 0);
        hand_off(smem, empty_phase, work);
      }
      __syncwarp();
    }
    // A CTA without a first tile still makes its one empty-handed claim.
    if (index == plan.first_tile(blockIdx.x) && lane0 && params.tile_counter != nullptr) {
      const int claim = atomicAdd(params.tile_counter, 1);
      if (Tiles::is_last_claim(claim, cursor.window_first, plan.grid)) atomicExch(params.tile_counter, 0);
    }
  }
};

template <class Kernel>
__global__ void __launch_bounds__(Kernel::kThreads, 1) fwd_kernel_sm90(CUTE_GRID_CONSTANT typename Kernel::Params const params) {
  extern __shared__ __align__(1024) char smem[];
  Kernel{}(params, smem);
}

}  // namespace dash_attn::sm90::fwd
