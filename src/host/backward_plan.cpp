#include "dash_attn/plan/backward_plan.hpp"

#include <cstdint>

#include "dash_attn/schedule/resolve.hpp"

namespace dash_attn::host {
namespace {

constexpr std::size_t kSliceAlignment = 256;

plan::WorkspaceSlice take(std::size_t& cursor, std::size_t bytes) {
  plan::WorkspaceSlice slice{cursor, bytes};
  cursor += (bytes + kSliceAlignment - 1) / kSliceAlignment * kSliceAlignment;
  return slice;
}

// Carves the slices for w.accum's slots of every head.
void carve(plan::BackwardWorkspace& w, const ProblemShape& s, const Options& options, bool varlen) {
  const bool ordered = options.deterministic && options.schedule != ScheduleKind::kAtomic;
  // dK/dV are summed across chains only when a chain walks part of its group.
  const bool grouped = backward_chain_heads(s, options) < s.heads_q / s.heads_kv;
  const auto q_slots = static_cast<std::size_t>(s.heads_q) * w.accum.q_per_head * (varlen ? 1 : s.batch);
  const auto kv_slots = static_cast<std::size_t>(s.heads_kv) * w.accum.kv_per_head * (varlen ? 1 : s.batch);
  const std::size_t q_rows = q_slots * w.tile.block_m;
  const std::size_t kv_rows = kv_slots * w.tile.block_n;
  std::size_t cursor = 0;
  w.dq_accum = take(cursor, q_rows * s.head_dim * sizeof(float));
  w.minus_lse = take(cursor, q_rows * sizeof(float));
  w.minus_d = take(cursor, q_rows * sizeof(float));
  if (ordered) w.dq_counters = take(cursor, q_slots * sizeof(int32_t));
  // Whether the call has sinks is not known here (they are an argument, not
  // an option): 4 bytes per dQ tile, under 0.1% of the dQ accumulator.
  w.sink_partials = take(cursor, q_slots * sizeof(float));
  if (grouped) {
    w.dk_accum = take(cursor, kv_rows * s.head_dim * sizeof(float));
    w.dv_accum = take(cursor, kv_rows * s.head_dim * sizeof(float));
    if (ordered) w.dkv_counters = take(cursor, 2 * kv_slots * sizeof(int32_t));
  }
  w.work_counter = take(cursor, sizeof(int32_t));
  if (varlen) {
    w.unordered = take(cursor, sizeof(int32_t));
    w.sequence_order = take(cursor, plan::kSequenceOrderArrays * static_cast<std::size_t>(s.batch) * sizeof(int32_t));
  }
  w.total_bytes = cursor;
}

// The tile shape and the tiles of the longest sequence (all of them at equal lengths).
plan::BackwardWorkspace tiles_of(const ProblemShape& s) {
  plan::BackwardWorkspace w;
  w.tile = backward_tile(static_cast<int>(s.head_dim));
  w.q_tiles = ceil_div(static_cast<int>(s.seqlen_q), w.tile.block_m);
  w.kv_tiles = ceil_div(static_cast<int>(s.seqlen_k), w.tile.block_n);
  return w;
}

}  // namespace

plan::BackwardWorkspace plan_backward_workspace(const ProblemShape& s, const Options& options) {
  plan::BackwardWorkspace w = tiles_of(s);
  w.accum = plan::AccumulatorTiles{w.q_tiles, w.kv_tiles};
  carve(w, s, options, false);
  return w;
}

plan::BackwardWorkspace plan_backward_varlen_workspace(const ProblemShape& s, const VarlenLengths& lengths,
                                                       const Options& options) {
  plan::BackwardWorkspace w = tiles_of(s);
  const int batch = static_cast<int>(s.batch);
  w.accum = plan::AccumulatorTiles{
      plan::AccumulatorTiles::varlen_slots(static_cast<int>(lengths.total_q), batch, w.tile.block_m),
      plan::AccumulatorTiles::varlen_slots(static_cast<int>(lengths.total_k), batch, w.tile.block_n)};
  carve(w, s, options, true);
  return w;
}

schedule::TileProblem backward_tile_problem(const ProblemShape& s, const Options& options) {
  const TileShape tile = backward_tile(static_cast<int>(s.head_dim));
  schedule::TileProblem p;
  p.batch = static_cast<int>(s.batch);
  p.heads_q = static_cast<int>(s.heads_q);
  p.heads_kv = static_cast<int>(s.heads_kv);
  p.block_m = tile.block_m;
  p.block_n = tile.block_n;
  p.causal = options.causal;
  p.seqlen_q = static_cast<int>(s.seqlen_q);
  p.seqlen_k = static_cast<int>(s.seqlen_k);
  p.window_left = options.window_left;
  p.window_right = options.window_right;
  return p;
}

schedule::TileProblem backward_varlen_tile_problem(const ProblemShape& s, const VarlenLengths& lengths,
                                                   const Options& options) {
  schedule::TileProblem p = backward_tile_problem(s, options);
  p.cu_seqlens_q = lengths.cu_seqlens_q;
  p.cu_seqlens_k = lengths.cu_seqlens_k;
  p.seqused_q = lengths.seqused_q;
  p.seqused_k = lengths.seqused_k;
  p.total_q = static_cast<int>(lengths.total_q);
  p.total_k = static_cast<int>(lengths.total_k);
  p.max_seqlen_q = static_cast<int>(s.seqlen_q);
  p.max_seqlen_k = static_cast<int>(s.seqlen_k);
  return p;
}

ScheduleKind backward_schedule(const ProblemShape& shape, const Options& options) {
  if (!options.deterministic || options.schedule == ScheduleKind::kAtomic) return ScheduleKind::kAtomic;
  return schedule::resolve_schedule(options.schedule, backward_tile_problem(shape, options));
}

int backward_chain_heads(const ProblemShape& shape, const Options& options) {
  if (options.q_heads_per_chain > 0) return options.q_heads_per_chain;
  return schedule::default_chain_heads(backward_tile_problem(shape, options));
}

ScheduleKind backward_varlen_schedule(const Options& options) {
  if (!options.deterministic || options.schedule == ScheduleKind::kAtomic) return ScheduleKind::kAtomic;
  // auto: descending, whatever the lengths (resolve.hpp says why).
  return options.schedule == ScheduleKind::kAuto ? ScheduleKind::kDescending : options.schedule;
}

}  // namespace dash_attn::host
