// Every schedule visits every (batch, q-head, KV tile, visible Q tile)
// exactly once and never a fully masked tile; work items decode consistently.
#include <gtest/gtest.h>

#include <map>
#include <tuple>

#include "dash_attn/schedule/resolve.hpp"
#include "dash_attn/schedule/schedule.hpp"
#include "schedule_test_problems.hpp"
#include "schedule_trace.hpp"

namespace dash_attn::testing {
namespace {

using Visit = std::tuple<int, int, int, int>;  // batch, head_q, kv, q

TEST(ScheduleCoverage, EveryVisibleTileOnceMaskedNever) {
  for (const OwnedProblem& owned : mixed_problems(1)) {
    const schedule::TileProblem p = owned.get();
    for (ScheduleKind kind : kAllKinds) {
      const model::ScheduleTrace trace = model::build_trace(p, kind);
      std::map<Visit, int> visits;
      std::map<std::tuple<int, int, int>, int> chains;
      for (const model::TraceChain& chain : trace.chains) {
        ++chains[{chain.batch, chain.head_q, chain.kv}];
        EXPECT_EQ(chain.head_kv, chain.head_q / p.group_size());
        for (const model::TraceStep& step : chain.steps) ++visits[{chain.batch, chain.head_q, chain.kv, step.q}];
      }
      std::size_t expected_visits = 0, expected_chains = 0;
      for (int b = 0; b < p.batch; ++b) {
        const schedule::HeadTiles t = p.head_tiles(b);
        for (int h = 0; h < p.heads_q; ++h)
          for (int kv = 0; kv < t.kv_tiles(); ++kv) {
            ++expected_chains;
            ASSERT_EQ((chains[{b, h, kv}]), 1) << owned.describe() << " " << to_string(kind) << " chain " << kv;
            for (int q = 0; q < t.q_tiles(); ++q) {
              const bool visible = q >= t.q_begin(kv);
              if (visible) ++expected_visits;
              ASSERT_EQ((visits.count({b, h, kv, q}) ? visits[{b, h, kv, q}] : 0), visible ? 1 : 0)
                  << owned.describe() << " " << to_string(kind) << " kv " << kv << " q " << q;
            }
          }
      }
      EXPECT_EQ(visits.size(), expected_visits);
      EXPECT_EQ(chains.size(), expected_chains);
    }
  }
}

TEST(ScheduleCoverage, ClaimOrderIsSequenceThenHeadThenSchedule) {
  for (const OwnedProblem& owned : random_problems(2, 100)) {
    const schedule::TileProblem p = owned.get();
    for (ScheduleKind kind : kAllKinds) {
      const schedule::Schedule s(schedule::resolve_schedule(kind, p));
      int k = 0;
      for (int b = 0; b < p.batch; ++b)
        for (int h = 0; h < p.heads_q; ++h)
          for (int i = 0; i < s.items_per_head(p.head_tiles(b)); ++i, ++k) {
            const schedule::WorkItem item = s.work_item(p, k);
            ASSERT_EQ(item.batch, b) << owned.describe();
            ASSERT_EQ(item.head_q, h);
            ASSERT_EQ(item.index_in_head, i);
          }
      EXPECT_EQ(s.total_items(p), k) << owned.describe();
    }
  }
}

TEST(ScheduleResolve, MasksAndAuto) {
  schedule::TileProblem p{1, 8, 8, 64, 128, false, 4096, 4096};
  EXPECT_EQ(schedule::resolve_schedule(ScheduleKind::kSymmetricShift, p), ScheduleKind::kShift);
  EXPECT_EQ(schedule::resolve_schedule(ScheduleKind::kAuto, p), ScheduleKind::kFA3);
  p.causal = true;
  EXPECT_EQ(schedule::resolve_schedule(ScheduleKind::kAuto, p), ScheduleKind::kFA3);  // 32 KV tiles
  p.seqlen_k = p.seqlen_q = 8192;
  EXPECT_EQ(schedule::resolve_schedule(ScheduleKind::kAuto, p), ScheduleKind::kFA3);  // 64 KV tiles
  p.seqlen_k = p.seqlen_q = 8320;
  EXPECT_EQ(schedule::resolve_schedule(ScheduleKind::kAuto, p), ScheduleKind::kDescending);  // 65 KV tiles
  p.seqlen_k = p.seqlen_q = 16384;
  EXPECT_EQ(schedule::resolve_schedule(ScheduleKind::kShift, p), ScheduleKind::kSymmetricShift);
  EXPECT_EQ(schedule::resolve_schedule(ScheduleKind::kAuto, p), ScheduleKind::kDescending);  // 128 KV tiles
  EXPECT_EQ(schedule::resolve_schedule(ScheduleKind::kFA3, p), ScheduleKind::kFA3);
  p.block_m = 128;  // hdim 64's square tiles: fa3 stays ahead on long causal heads
  EXPECT_EQ(schedule::resolve_schedule(ScheduleKind::kAuto, p), ScheduleKind::kFA3);
}

}  // namespace
}  // namespace dash_attn::testing
