// dK, dV of one chain from the MMA warpgroups' registers to global memory:
// written directly for MHA; for GQA/MQA added into the fp32 accumulators of
// the kv-head, in ascending q-head order when deterministic (separate dK and
// dV counters so one q-head adds dK while the next adds dV).
#pragma once

#include "bwd_params_sm90.hpp"
#include "bwd_sync_sm90.hpp"

namespace dash_attn::sm90::bwd {

template <class Traits>
struct BwdEpilogue {
  using Element = typename Traits::Element;
  static constexpr int kBlockN = Traits::kBlockN;
  static constexpr int kHeadDim = Traits::kHeadDim;

  const BwdParams<Traits>& params;
  int thread;  // 0..kMmaThreads-1

  template <class FragDk, class FragDv>
  __device__ void store(const ChainWork& work, FragDk& dk, FragDv& dv) {
    typename Traits::TiledMmaDkv mma_dkv;
    Tensor coord = mma_dkv.get_thread_slice(thread).partition_C(
        make_identity_tensor(Shape<Int<kBlockN>, Int<kHeadDim>>{}));
    CUTE_UNROLL
    for (int i = 0; i < size(dk); ++i) dk(i) *= params.softmax_scale;
    if (params.dk_accum == nullptr) {
      write_direct(work, dk, coord, params.dk, params.dk_strides);
      write_direct(work, dv, coord, params.dv, params.dv_strides);
      return;
    }
    const int64_t tile =
        (static_cast<int64_t>(work.batch) * params.problem.heads_kv + work.head_kv) * work.tiles.kv_tiles() + work.kv;
    const int rank = params.schedule.dkv_rank(params.problem, work.head_q);
    accumulate(dv, coord, params.dv_accum + tile * kBlockN * kHeadDim, params.dv_counters, tile, rank);
    accumulate(dk, coord, params.dk_accum + tile * kBlockN * kHeadDim, params.dk_counters, tile, rank);
  }

 private:
  template <class Frag, class Coord>
  __device__ void write_direct(const ChainWork& work, const Frag& acc, const Coord& coord, Element* out,
                               const int64_t* strides) const {
    Element* base = out + work.batch * strides[0] + work.head_q * strides[2];
    const int first_key = work.kv * kBlockN;
    CUTE_UNROLL
    for (int i = 0; i < size(acc); i += 2) {
      const int key = first_key + get<0>(coord(i));
      if (key >= work.tiles.seqlen_k) continue;
      // Adjacent accumulator elements are adjacent columns: one 4-byte store.
      Element pair[2] = {static_cast<Element>(acc(i)), static_cast<Element>(acc(i + 1))};
      *reinterpret_cast<uint32_t*>(base + key * strides[1] + get<1>(coord(i))) = *reinterpret_cast<uint32_t*>(pair);
    }
  }

  template <class Frag, class Coord>
  __device__ void accumulate(const Frag& acc, const Coord& coord, float* tile_accum, int* counters, int64_t tile,
                             int rank) const {
    const bool ordered = rank != schedule::kUnordered;
    if (ordered) {
      if (thread == 0) wait_for_rank(counters + tile, rank);
      named_barrier_sync(static_cast<uint32_t>(NamedBarrier::kEpilogue), Traits::kMmaThreads);
    }
    CUTE_UNROLL
    for (int i = 0; i < size(acc); i += 2) {
      float* dst = tile_accum + get<0>(coord(i)) * kHeadDim + get<1>(coord(i));
      atomicAdd(reinterpret_cast<float2*>(dst), make_float2(acc(i), acc(i + 1)));
    }
    if (ordered) {
      __threadfence();
      named_barrier_sync(static_cast<uint32_t>(NamedBarrier::kEpilogue), Traits::kMmaThreads);
      if (thread == 0) release_increment(counters + tile);
    }
  }
};

}  // namespace dash_attn::sm90::bwd
