// dK, dV of one chain from the MMA warpgroups' registers to global memory.
// For MHA staged in shared memory with stmatrix, as BwdTraits says
// (kDkvInOneDsStage, kDkvStagedInKv): by TMA stores from the dS buffers at
// hdim 64 and 128, the last of which runs on into the next chain; at hdim 256
// from the K and V buffers with coalesced 16-byte stores, whole 128-byte lines
// where the accumulator layout would scatter 16-byte pieces over 8 rows. A
// GQA/MQA chain that walked its whole group (Schedule::chain_heads) has final
// dK/dV too and stores them the same way, at its KV head. One that walked
// part of it adds into the fp32 accumulators of the KV head, in ascending
// chain-head order when deterministic (separate dK and dV counters so one
// chain adds dK while the next adds dV). Varlen stores whole tiles by TMA
// too, from the sequence's first row, and writes the rows of a sequence's
// last, partial tile with plain stores (a TMA store of that tile would run
// into the next sequence's rows); the plain stores cost the MMA warpgroups
// what TMA hides: at 512-token sequences, where every tile is whole, they
// made the varlen main kernel 7-9% slower than the fixed one (H200, 2026-12-03).
#pragma once

#include "bwd_params_sm90.hpp"
#include "bwd_barriers_sm90.hpp"
#include "kernels/sm90/common/sync_sm90.hpp"
#include "kernels/sm90/common/wgmma_sm90.hpp"

namespace dash_attn::sm90::bwd {

template <class Traits>
struct BwdEpilogue {
  using Element = typename Traits::Element;
  static constexpr int kBlockN = Traits::kBlockN;
  static constexpr int kHeadDim = Traits::kHeadDim;
  static constexpr int kTileElements = cosize_v<typename Traits::SmemLayoutK>;
  static_assert(kTileElements <= Traits::kDsBuffers * cosize_v<typename Traits::SmemLayoutDs>,
                "a dK/dV tile must fit in the dS buffers");

  const BwdParams<Traits>& params;
  typename Traits::SharedStorage& smem;
  int thread;  // 0..kMmaThreads-1

  // Whether the chain's dK/dV go out by TMA (asynchronously): always at equal
  // lengths; for varlen when the KV tile lies wholly inside its sequence.
  __device__ bool stores_by_tma(const ChainWork& work) const {
    return !params.varlen || (work.kv + 1) * kBlockN <= work.tiles.seqlen_k;
  }

  // staging: where BwdMainloop::dkv_staging puts dK and dV in the dS buffers.
  template <class FragDk, class FragDv>
  __device__ void store(const ChainWork& work, FragDk& dk, FragDv& dv, Element* staging) {
    CUTE_UNROLL
    for (int i = 0; i < size(dk); ++i) dk(i) *= params.softmax_scale;
    if (params.dk_accum == nullptr) {
      // Before the first stmatrix: the other warpgroup's last GEMMs may still read dS, K and V.
      sync();
      if constexpr (Traits::kDkvStagedInKv) {
        stage(dk, smem.k);
        stage(dv, smem.v);
        sync();
        write_rows(work, smem.k, params.dk, params.dk_strides);
        write_rows(work, smem.v, params.dv, params.dv_strides);
        // K and V go back to the producer (the mainloop left this arrive to
        // the epilogue); its TMA loads (async proxy) overwrite what this
        // thread just read.
        fence_proxy_async_shared();
        cutlass::arch::ClusterBarrier::arrive(&smem.kv_empty);
      } else if (!stores_by_tma(work)) {
        // One tile at a time through the staging buffer; the last sync lets
        // the next chain's dS stores reuse it. A previous chain's TMA store
        // may still read the buffer.
        if (thread == 0) tma_store_wait<0>();
        sync();
        stage(dk, staging);
        sync();
        write_rows(work, staging, params.dk, params.dk_strides);
        sync();
        stage(dv, staging);
        sync();
        write_rows(work, staging, params.dv, params.dv_strides);
        sync();
      } else if constexpr (Traits::kDkvInOneDsStage) {
        // The previous chain's stores read the other dS stage; after the next
        // barrier every thread may reuse it.
        if (thread == 0) tma_store_wait<0>();
        stage(dk, staging);
        stage(dv, staging + kTileElements);
        fence_proxy_async_shared();
        sync();
        if (thread == 0) {
          tma_store_tile(params.tma_dk, staging, work);
          tma_store_tile(params.tma_dv, staging + kTileElements, work);
          tma_store_arrive();
        }
      } else {
        stage_and_store(dk, params.tma_dk, staging, work);
        // dK has been read out of the buffers dV goes to.
        if (thread == 0) tma_store_wait<0>();
        sync();
        stage_and_store(dv, params.tma_dv, staging, work);
      }
      return;
    }
    typename Traits::TiledMmaDkv mma_dkv;
    Tensor coord = mma_dkv.get_thread_slice(thread).partition_C(
        make_identity_tensor(Shape<Int<kBlockN>, Int<kHeadDim>>{}));
    const int64_t tile = params.accum.first_kv_tile(params.problem, work.batch, work.head_kv) + work.kv;
    const int rank = params.trusts_ranks() ? params.schedule.dkv_rank(params.problem, work.head_q) : schedule::kUnordered;
    accumulate(dv, coord, params.dv_accum + tile * kBlockN * kHeadDim, params.dv_counters, tile, rank);
    accumulate(dk, coord, params.dk_accum + tile * kBlockN * kHeadDim, params.dk_counters, tile, rank);
  }

 private:
  // All MMA threads.
  __device__ static void sync() { named_barrier_sync(static_cast<uint32_t>(BwdBarrier::kEpilogue), Traits::kMmaThreads); }

  // Accumulator -> (kBlockN x kHeadDim) tile in K's shared layout, rows = keys.
  template <class Frag>
  __device__ void stage(const Frag& acc, Element* buffer) const {
    typename Traits::TiledMmaDkv mma_dkv;
    Tensor s_tile = make_tensor(make_smem_ptr(buffer), typename Traits::SmemLayoutK{});
    auto r2s = make_tiled_copy_C(typename Traits::SmemCopyAtomAcc{}, mma_dkv);
    auto thr_r2s = r2s.get_thread_slice(thread);
    Tensor converted = convert_fragment<Element>(acc);
    copy(r2s, thr_r2s.retile_S(converted), thr_r2s.partition_D(s_tile));
  }

  // One tile through `buffer`: staged by every thread, then stored by TMA
  // from thread 0 (not awaited).
  template <class Frag, class TmaStore>
  __device__ void stage_and_store(const Frag& acc, const TmaStore& tma, Element* buffer, const ChainWork& work) const {
    stage(acc, buffer);
    fence_proxy_async_shared();
    sync();
    if (thread == 0) {
      tma_store_tile(tma, buffer, work);
      tma_store_arrive();
    }
  }

  // The staged (kBlockN x kHeadDim) tile to rows [kv * kBlockN, ...) of the
  // KV head (of the sequence, for varlen); TMA drops the rows past seqlen_k
  // at equal lengths, and varlen only stores whole tiles this way.
  template <class TmaStore>
  __device__ void tma_store_tile(const TmaStore& tma, Element* buffer, const ChainWork& work) const {
    const schedule::TileProblem& p = params.problem;
    Tensor m_out =
        tma.get_tma_tensor(make_shape(params.tma_rows_k(), Int<kHeadDim>{}, p.heads_kv, params.tma_batches()));
    Tensor rows = domain_offset(make_coord(params.first_row_k(work.batch), 0),
                                m_out(_, _, work.head_kv, params.tma_batch(work.batch)));
    Tensor g_out = local_tile(rows, Shape<Int<kBlockN>, Int<kHeadDim>>{}, make_coord(work.kv, _0{}));
    Tensor s_tile = make_tensor(make_smem_ptr(buffer), typename Traits::SmemLayoutK{});
    auto [tma_g, tma_s] = tma_partition(tma, Int<0>{}, Layout<_1>{}, group_modes<0, 2>(s_tile), group_modes<0, 2>(g_out));
    copy(tma, tma_s, tma_g);
  }

  // Each warpgroup writes back half of the staged key rows, 16 bytes per
  // thread and consecutive threads along a row.
  __device__ void write_rows(const ChainWork& work, const Element* buffer, Element* out, const int64_t* strides) const {
    constexpr int kChunksPerRow = kHeadDim / 8;
    constexpr int kRows = kBlockN / Traits::kMmaWarpgroups;
    Tensor s_tile = make_tensor(make_smem_ptr(buffer), typename Traits::SmemLayoutK{});
    Element* base = out + work.batch * strides[0] + static_cast<int64_t>(params.first_row_k(work.batch)) * strides[1] +
                    work.head_kv * strides[2];
    const int first_row = thread / 128 * kRows;
    CUTE_UNROLL
    for (int i = thread % 128; i < kRows * kChunksPerRow; i += 128) {
      const int row = first_row + i / kChunksPerRow, col = i % kChunksPerRow * 8;
      const int key = work.kv * kBlockN + row;
      if (key < work.tiles.seqlen_k)
        *reinterpret_cast<uint4*>(base + static_cast<int64_t>(key) * strides[1] + col) = *reinterpret_cast<const uint4*>(&s_tile(row, col));
    }
  }

  template <class Frag, class Coord>
  __device__ void accumulate(const Frag& acc, const Coord& coord, float* tile_accum, int* counters, int64_t tile,
                             int rank) const {
    const bool ordered = rank != schedule::kUnordered;
    if (ordered) {
      if (thread == 0) wait_for_rank(counters + tile, rank);
      sync();
    }
    CUTE_UNROLL
    for (int i = 0; i < size(acc); i += 2) {
      float* dst = tile_accum + get<0>(coord(i)) * kHeadDim + get<1>(coord(i));
      atomicAdd(reinterpret_cast<float2*>(dst), make_float2(acc(i), acc(i + 1)));
    }
    if (ordered) {
      __threadfence();
      sync();
      if (thread == 0) release_increment(counters + tile);
    }
  }
};

}  // namespace dash_attn::sm90::bwd
