// Host planning of the backward: which schedule a call runs (a pure function
// of shape and options), the tile problem the kernel and the schedules see,
// and the workspace slice of the main kernel's claim counter.
#include <gtest/gtest.h>

#include "dash_attn/schedule/schedule.hpp"
#include "dash_attn/plan/backward_plan.hpp"

namespace dash_attn {
namespace {

Options with(ScheduleKind kind, bool causal, bool deterministic = true) {
  Options o;
  o.schedule = kind;
  o.causal = causal;
  o.deterministic = deterministic;
  return o;
}

TEST(BackwardPlan, ScheduleIsAtomicOnlyWhenNotDeterministic) {
  const ProblemShape s{2, 1000, 1000, 4, 2, 128};
  EXPECT_EQ(host::backward_schedule(s, with(ScheduleKind::kAtomic, false, false)), ScheduleKind::kAtomic);
  EXPECT_EQ(host::backward_schedule(s, with(ScheduleKind::kAuto, true, false)), ScheduleKind::kAtomic);
  EXPECT_EQ(host::backward_schedule(s, with(ScheduleKind::kFA3, true)), ScheduleKind::kFA3);
  EXPECT_EQ(host::backward_schedule(s, with(ScheduleKind::kDescending, false)), ScheduleKind::kDescending);
}

TEST(BackwardPlan, ShiftFollowsTheMaskAndAutoTheShape) {
  const ProblemShape s{2, 1000, 1000, 4, 2, 128};
  EXPECT_EQ(host::backward_schedule(s, with(ScheduleKind::kShift, true)), ScheduleKind::kSymmetricShift);
  EXPECT_EQ(host::backward_schedule(s, with(ScheduleKind::kSymmetricShift, false)), ScheduleKind::kShift);
  EXPECT_EQ(host::backward_schedule(s, with(ScheduleKind::kAuto, true)), ScheduleKind::kFA3);  // 64 x 128, 8 KV tiles
  EXPECT_EQ(host::backward_schedule(s, with(ScheduleKind::kAuto, false)), ScheduleKind::kDescending);
  const ProblemShape long_rows{2, 4096, 4096, 4, 2, 128};  // 32 KV tiles
  EXPECT_EQ(host::backward_schedule(long_rows, with(ScheduleKind::kAuto, true)), ScheduleKind::kDescending);
  const ProblemShape square_tiles{1, 1000, 1000, 4, 4, 64};  // hdim 64: 128 x 128 tiles, 8 KV tiles
  EXPECT_EQ(host::backward_schedule(square_tiles, with(ScheduleKind::kAuto, true)), ScheduleKind::kDescending);
  const ProblemShape small_square_tiles{1, 1000, 1000, 4, 4, 256};  // hdim 256: 64 x 64 tiles, 16 KV tiles
  EXPECT_EQ(host::backward_schedule(small_square_tiles, with(ScheduleKind::kAuto, true)), ScheduleKind::kFA3);
  EXPECT_EQ(host::backward_schedule(square_tiles, with(ScheduleKind::kAuto, false)), ScheduleKind::kDescending);
}

TEST(BackwardPlan, TileProblemMatchesTheWorkspaceTiles) {
  const ProblemShape s{3, 333, 200, 4, 2, 64};
  const Options o = with(ScheduleKind::kFA3, true);
  const schedule::TileProblem p = host::backward_tile_problem(s, o);
  const plan::BackwardWorkspace w = host::plan_backward_workspace(s, o);
  EXPECT_EQ(p.batch, 3);
  EXPECT_EQ(p.heads_q, 4);
  EXPECT_EQ(p.heads_kv, 2);
  EXPECT_TRUE(p.causal);
  EXPECT_EQ(p.block_m, w.tile.block_m);
  EXPECT_EQ(p.block_n, w.tile.block_n);
  EXPECT_EQ(p.head_tiles(0).q_tiles(), w.q_tiles);
  EXPECT_EQ(p.head_tiles(0).kv_tiles(), w.kv_tiles);
  // One work item per chain for fa3: batch * heads_q * kv_tiles.
  EXPECT_EQ(schedule::Schedule(ScheduleKind::kFA3, p).total_items(p), 3 * 4 * w.kv_tiles);
}

TEST(BackwardPlan, ClaimCounterHasItsOwnSlice) {
  const ProblemShape s{2, 100, 130, 8, 8, 128};
  for (const Options& o : {with(ScheduleKind::kFA3, false), with(ScheduleKind::kAtomic, false, false)}) {
    const plan::BackwardWorkspace w = host::plan_backward_workspace(s, o);
    EXPECT_EQ(w.work_counter.bytes, sizeof(int32_t));
    EXPECT_EQ(w.work_counter.offset % 256, 0u);
    EXPECT_LE(w.work_counter.offset + w.work_counter.bytes, w.total_bytes);
    EXPECT_GE(w.work_counter.offset, w.minus_d.offset + w.minus_d.bytes);
  }
}

TEST(BackwardPlan, SliceInWorkspaceIsItsFirstByteOrNullWhenEmpty) {
  alignas(256) char workspace[1024];
  const plan::WorkspaceSlice counters{512, 8}, absent{256, 0};
  EXPECT_EQ(counters.in<int>(workspace), reinterpret_cast<int*>(workspace + 512));
  EXPECT_EQ(counters.in<const float>(workspace), reinterpret_cast<const float*>(workspace + 512));
  EXPECT_EQ(absent.in<int>(workspace), nullptr);
  // The atomic schedule has no dQ counters: the launches pass null, which the kernels test.
  const plan::BackwardWorkspace w =
      host::plan_backward_workspace(ProblemShape{2, 100, 130, 8, 8, 128}, with(ScheduleKind::kAtomic, false, false));
  EXPECT_EQ(w.dq_counters.in<int>(workspace), nullptr);
}

}  // namespace
}  // namespace dash_attn
