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

}  // namespace

plan::BackwardWorkspace plan_backward_workspace(const ProblemShape& s, const Options& options) {
  plan::BackwardWorkspace w;
  w.tile = backward_tile(static_cast<int>(s.head_dim));
  w.q_tiles = ceil_div(static_cast<int>(s.seqlen_q), w.tile.block_m);
  w.kv_tiles = ceil_div(static_cast<int>(s.seqlen_k), w.tile.block_n);
  const bool ordered = options.deterministic && options.schedule != ScheduleKind::kAtomic;
  const bool grouped = s.heads_kv != s.heads_q;
  const auto q_rows = static_cast<std::size_t>(s.batch * s.heads_q) * w.q_tiles * w.tile.block_m;
  const auto kv_rows = static_cast<std::size_t>(s.batch * s.heads_kv) * w.kv_tiles * w.tile.block_n;
  const auto kv_tile_count = static_cast<std::size_t>(s.batch * s.heads_kv) * w.kv_tiles;
  std::size_t cursor = 0;
  w.dq_accum = take(cursor, q_rows * s.head_dim * sizeof(float));
  w.lse_log2 = take(cursor, q_rows * sizeof(float));
  w.dpsum = take(cursor, q_rows * sizeof(float));
  if (ordered) w.dq_counters = take(cursor, static_cast<std::size_t>(s.batch * s.heads_q) * w.q_tiles * sizeof(int32_t));
  if (grouped) {
    w.dk_accum = take(cursor, kv_rows * s.head_dim * sizeof(float));
    w.dv_accum = take(cursor, kv_rows * s.head_dim * sizeof(float));
    if (ordered) w.dkv_counters = take(cursor, 2 * kv_tile_count * sizeof(int32_t));
  }
  w.work_counter = take(cursor, sizeof(int32_t));
  w.total_bytes = cursor;
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
  return p;
}

ScheduleKind backward_schedule(const ProblemShape& shape, const Options& options) {
  if (!options.deterministic || options.schedule == ScheduleKind::kAtomic) return ScheduleKind::kAtomic;
  return schedule::resolve_schedule(options.schedule, backward_tile_problem(shape, options));
}

}  // namespace dash_attn::host
