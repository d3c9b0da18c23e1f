// The backward workspace's layout (plain data the kernels read) and the host
// planning that carves it (src/host/backward_plan.cpp). The same layout is
// used by backward_workspace_size() and by the kernels, so the two never disagree.
#pragma once

#include <cstddef>

#include "dash_attn/host_device.hpp"
#include "dash_attn/plan/accumulator_tiles.hpp"
#include "dash_attn/schedule/tile_problem.hpp"
#include "dash_attn/tile_config.hpp"
#include "dash_attn/types.hpp"

namespace dash_attn::plan {

struct WorkspaceSlice {
  std::size_t offset = 0;  // bytes from the workspace base, 256-byte aligned
  std::size_t bytes = 0;
  // The slice's first byte in the workspace at `base`, as T*, or null for an
  // empty slice (the kernels test for null where a slice is optional).
  template <class T>
  T* in(void* base) const {
    return bytes ? reinterpret_cast<T*>(static_cast<char*>(base) + offset) : nullptr;
  }
};

// The varlen sequence_order slice (BackwardWorkspace): kSequenceOrderArrays
// arrays of `batch` int32, one after the other. The preprocess writes them
// (Int = int32_t), the main kernel's claims read them (Int = const int32_t).
inline constexpr int kSequenceOrderArrays = 3;
template <class Int>
struct SequenceOrder {
  Int* order;       // the sequences in claim order (sequence_claims_before)
  Int* run_first;   // per claim position: the first position of its run of equal lengths
  Int* run_length;  // per claim position: the run's length
};
static_assert(sizeof(SequenceOrder<int>) == kSequenceOrderArrays * sizeof(int*), "one pointer per array of the slice");
template <class Int>
DASH_HOST_DEVICE constexpr SequenceOrder<Int> sequence_order_arrays(Int* slice, int batch) {
  return SequenceOrder<Int>{slice, slice + batch, slice + 2 * batch};
}

struct BackwardWorkspace {
  TileShape tile;
  int q_tiles = 0;   // per (batch, head); varlen: of the longest sequence (max_seqlen_q)
  int kv_tiles = 0;  // per (batch, head); varlen: of the longest sequence (max_seqlen_k)
  AccumulatorTiles accum;  // where each (sequence, head)'s tiles are in the slices below
  // Each slice holds one entry (a block_m x head_dim tile, block_m rows, one
  // counter) per slot of accum: the slots of every head.
  WorkspaceSlice dq_accum;     // fp32 dQ tiles (block_m x head_dim each, bwd_dq_layout.hpp)
  WorkspaceSlice minus_lse;    // fp32 block_m rows per dQ slot: -LSE as the main kernel reads it
  WorkspaceSlice minus_d;      // fp32 block_m rows per dQ slot: -D, D = rowsum(dO * O) - dlse
  WorkspaceSlice dq_counters;  // int32 per dQ slot (deterministic schedules only)
  WorkspaceSlice sink_partials;  // fp32 per dQ slot: the tile's share of d sinks (used with dsinks)
  WorkspaceSlice dk_accum;     // fp32 (block_n x head_dim, row-major) per KV slot, GQA/MQA only
  WorkspaceSlice dv_accum;     // same as dk_accum
  WorkspaceSlice dkv_counters; // int32 per KV slot, one for dK and one for dV (GQA/MQA, deterministic)
  WorkspaceSlice work_counter; // int32: the main kernel's next unclaimed chain
  WorkspaceSlice unordered;    // varlen: int32 set by the preprocess when cu_seqlens are not monotone
  // Varlen: kSequenceOrderArrays int32 arrays of `batch`: the sequences in
  // claim order (sequence_claims_before), then per claim position the first
  // position of its run of equal lengths and the run's length.
  WorkspaceSlice sequence_order;
  std::size_t total_bytes = 0;
};

}  // namespace dash_attn::plan

namespace dash_attn::host {

plan::BackwardWorkspace plan_backward_workspace(const ProblemShape& shape, const Options& options);
// shape as VarlenBackwardArgs has it (batch = sequences, seqlen = max_seqlen).
plan::BackwardWorkspace plan_backward_varlen_workspace(const ProblemShape& shape, const VarlenLengths& lengths,
                                                       const Options& options);

// The backward problem in tiles, as the schedules and the kernel see it.
schedule::TileProblem backward_tile_problem(const ProblemShape& shape, const Options& options);
// A varlen batch's: the device arrays, the totals and max_seqlen as bounds.
schedule::TileProblem backward_varlen_tile_problem(const ProblemShape& shape, const VarlenLengths& lengths,
                                                   const Options& options);

// The schedule a call runs: atomic unless deterministic, else the requested
// kind resolved for the shape (auto, or shift/symmetric_shift by mask). A
// pure function of shape and options, never of the device.
ScheduleKind backward_schedule(const ProblemShape& shape, const Options& options);
// A varlen batch's (validated: never a wave schedule): auto is descending.
ScheduleKind backward_varlen_schedule(const Options& options);

// q-heads per chain (options.q_heads_per_chain, or the default rule): the
// plan allocates the fp32 dK/dV accumulators only when a chain walks less
// than its whole GQA group, and the kernel's Schedule takes the same value.
int backward_chain_heads(const ProblemShape& shape, const Options& options);

}  // namespace dash_attn::host
