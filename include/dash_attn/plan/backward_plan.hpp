// The backward workspace's layout (plain data the kernels read) and the host
// planning that carves it (src/host/backward_plan.cpp). The same layout is
// used by backward_workspace_size() and by the kernels, so the two never disagree.
#pragma once

#include <cstddef>

#include "dash_attn/schedule/tile_problem.hpp"
#include "dash_attn/tile_config.hpp"
#include "dash_attn/types.hpp"

namespace dash_attn::plan {

struct WorkspaceSlice {
  std::size_t offset = 0;  // bytes from the workspace base, 256-byte aligned
  std::size_t bytes = 0;
};

struct BackwardWorkspace {
  TileShape tile;
  int q_tiles = 0;   // per (batch, head)
  int kv_tiles = 0;  // per (batch, head)
  WorkspaceSlice dq_accum;     // fp32 (batch, heads_q, q_tiles * block_m, head_dim)
  WorkspaceSlice lse_log2;     // fp32 (batch, heads_q, q_tiles * block_m)
  WorkspaceSlice dpsum;        // fp32 (batch, heads_q, q_tiles * block_m): D = rowsum(dO * O)
  WorkspaceSlice dq_counters;  // int32 per dQ tile (deterministic schedules only)
  WorkspaceSlice dk_accum;     // fp32 (batch, heads_kv, kv_tiles * block_n, head_dim), GQA/MQA only
  WorkspaceSlice dv_accum;     // same as dk_accum
  WorkspaceSlice dkv_counters; // int32 per KV tile, one for dK and one for dV (GQA/MQA, deterministic)
  WorkspaceSlice work_counter; // int32: the main kernel's next unclaimed chain
  std::size_t total_bytes = 0;
};

}  // namespace dash_attn::plan

namespace dash_attn::host {

plan::BackwardWorkspace plan_backward_workspace(const ProblemShape& shape, const Options& options);

// The backward problem in tiles, as the schedules and the kernel see it.
schedule::TileProblem backward_tile_problem(const ProblemShape& shape, const Options& options);

// The schedule a call runs: atomic unless deterministic, else the requested
// kind resolved for the shape (auto, or shift/symmetric_shift by mask). A
// pure function of shape and options, never of the device.
ScheduleKind backward_schedule(const ProblemShape& shape, const Options& options);

}  // namespace dash_attn::host
