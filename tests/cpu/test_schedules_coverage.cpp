// Every schedule visits every (batch, q-head, KV tile, visible Q tile)
// exactly once and never a fully masked tile; work items decode consistently.
#include <gtest/gtest.h>
#include <array>
#include <vector>

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

// The claim order, enumerated the slow way: heads (sequence-major) in groups
// of `interleave` (cut at each sequence's end for varlen), items dealt
// round-robin over a group's heads.
std::vector<std::array<int, 3>> expected_claims(const schedule::TileProblem& p, const schedule::Schedule& s) {
  // (batch, head_q, items); ordered schedules list them member-major within
  // a span (all sequences of equal length, one varlen sequence): member 0 of
  // every (sequence, KV head) pair of the span, then member 1, ...; atomic
  // in q-head order.
  std::vector<std::array<int, 3>> heads;
  const int group = s.ordered() ? p.group_size() : 1;
  const int kv_heads = p.heads_q / group;
  auto add_span = [&](int first_batch, int end_batch) {
    for (int member = 0; member < group; ++member)
      for (int b = first_batch; b < end_batch; ++b)
        for (int kv_head = 0; kv_head < kv_heads; ++kv_head)
          heads.push_back({b, kv_head * group + member, s.items_per_head(p.head_tiles(b))});
  };
  if (p.is_varlen())
    for (int b = 0; b < p.batch; ++b) add_span(b, b + 1);
  else
    add_span(0, p.batch);
  const int g = s.interleaved_heads();
  std::vector<std::array<int, 3>> claims;  // (batch, head_q, index_in_head)
  for (size_t first = 0; first < heads.size();) {
    size_t end = first;
    while (end < heads.size() && end - first < static_cast<size_t>(g) &&
           (!p.is_varlen() || heads[end][0] == heads[first][0]))
      ++end;
    for (int i = 0; i < heads[first][2]; ++i)
      for (size_t h = first; h < end; ++h) claims.push_back({heads[h][0], heads[h][1], i});
    first = end;
  }
  return claims;
}

TEST(ScheduleCoverage, ClaimOrderDealsInterleavedHeadsRoundRobin) {
  for (const OwnedProblem& owned : random_problems(2, 100)) {
    const schedule::TileProblem p = owned.get();
    for (ScheduleKind kind : kAllKinds)
      for (int interleave : {1, 2, 3, 8, 1000}) {
        const schedule::Schedule s(schedule::resolve_schedule(kind, p), interleave);
        const auto claims = expected_claims(p, s);
        ASSERT_EQ(s.total_items(p), static_cast<int>(claims.size())) << owned.describe();
        for (int k = 0; k < s.total_items(p); ++k) {
          const schedule::WorkItem item = s.work_item(p, k);
          ASSERT_EQ(item.batch, claims[k][0]) << owned.describe() << " " << to_string(kind) << " G " << interleave;
          ASSERT_EQ(item.head_q, claims[k][1]) << owned.describe() << " k " << k;
          ASSERT_EQ(item.index_in_head, claims[k][2]) << owned.describe() << " k " << k;
        }
      }
  }
}

TEST(ScheduleCoverage, OnlyChainSchedulesInterleaveHeads) {
  EXPECT_EQ(schedule::Schedule(ScheduleKind::kShift, 8).interleaved_heads(), 1);
  EXPECT_EQ(schedule::Schedule(ScheduleKind::kSymmetricShift, 8).interleaved_heads(), 1);
  schedule::TileProblem p{1, 8, 8, 64, 128, true, 4096, 4096};
  EXPECT_EQ(schedule::claim_interleave(ScheduleKind::kShift, p, 1), 1);
  EXPECT_EQ(schedule::claim_interleave(ScheduleKind::kSymmetricShift, p, 1), 1);
  for (ScheduleKind kind : {ScheduleKind::kAtomic, ScheduleKind::kFA3, ScheduleKind::kDescending})
    EXPECT_EQ(schedule::claim_interleave(kind, p, 1), schedule::kChainClaimInterleave) << to_string(kind);
}

// Descending on causal heads of hdim 64's 128 x 128 tiles deals more heads;
// nothing else does (not full masks or non-causal windows, other tiles or kinds,
// or chains that walk q-heads).
TEST(ScheduleCoverage, CausalWideTilesInterleaveMoreHeads) {
  schedule::TileProblem p{1, 8, 8, 128, 128, true, 4096, 4096};
  EXPECT_EQ(schedule::claim_interleave(ScheduleKind::kDescending, p, 1), schedule::kCausalWideTileClaimInterleave);
  EXPECT_EQ(schedule::Schedule(ScheduleKind::kDescending, p).interleaved_heads(),
            schedule::kCausalWideTileClaimInterleave);
  for (ScheduleKind kind : {ScheduleKind::kAtomic, ScheduleKind::kFA3})
    EXPECT_EQ(schedule::claim_interleave(kind, p, 1), schedule::kChainClaimInterleave) << to_string(kind);
  schedule::TileProblem full = p;
  full.causal = false;
  EXPECT_EQ(schedule::claim_interleave(ScheduleKind::kDescending, full, 1), schedule::kChainClaimInterleave);
  schedule::TileProblem window = full;
  window.window_left = 1024, window.window_right = 0;
  EXPECT_EQ(schedule::claim_interleave(ScheduleKind::kDescending, window, 1), schedule::kChainClaimInterleave);
  schedule::TileProblem small = p;
  small.block_m = small.block_n = 64;  // hdim 256
  EXPECT_EQ(schedule::claim_interleave(ScheduleKind::kDescending, small, 1), schedule::kChainClaimInterleave);
  // Chains that walk q-heads are spaced apart by their walk already.
  schedule::TileProblem grouped{1, 64, 8, 128, 128, true, 4096, 4096};
  EXPECT_EQ(schedule::claim_interleave(ScheduleKind::kDescending, grouped, 1), schedule::kCausalWideTileClaimInterleave);
  for (int chain_heads : {2, 4, 8})
    EXPECT_EQ(schedule::claim_interleave(ScheduleKind::kDescending, grouped, chain_heads),
              schedule::kChainClaimInterleave) << chain_heads;
}

// hdim 256's 64 x 64 tiles deal 2 heads (L2 holds the Q / dO / dQ of fewer
// heads' chains at that tile), walked chains on full masks 1, except one
// q-head's causal chains under descending (8).
TEST(ScheduleCoverage, NarrowTilesInterleaveFewHeads) {
  for (bool causal : {false, true})
    for (int chain_heads : {1, 4}) {
      const schedule::TileProblem p{1, 32, 8, 64, 64, causal, 8192, 8192};
      for (ScheduleKind kind : {ScheduleKind::kAtomic, ScheduleKind::kFA3, ScheduleKind::kDescending}) {
        const bool keeps_eight = kind == ScheduleKind::kDescending && causal && chain_heads == 1;
        const int expected = keeps_eight                  ? schedule::kChainClaimInterleave
                             : !causal && chain_heads > 1 ? schedule::kNarrowTileWalkedFullClaimInterleave
                                                          : schedule::kNarrowTileClaimInterleave;
        EXPECT_EQ(schedule::claim_interleave(kind, p, chain_heads), expected)
            << to_string(kind) << (causal ? " causal" : " full") << ", chain_heads " << chain_heads;
      }
      EXPECT_EQ(schedule::claim_interleave(ScheduleKind::kShift, p, chain_heads), 1);
    }
}

TEST(ScheduleResolve, MasksAndAuto) {
  schedule::TileProblem p{1, 8, 8, 64, 128, false, 4096, 4096};
  EXPECT_EQ(schedule::resolve_schedule(ScheduleKind::kSymmetricShift, p), ScheduleKind::kShift);
  EXPECT_EQ(schedule::resolve_schedule(ScheduleKind::kAuto, p), ScheduleKind::kDescending);
  p.causal = true;
  EXPECT_EQ(schedule::resolve_schedule(ScheduleKind::kAuto, p), ScheduleKind::kDescending);  // 64 x 128 tiles, 32 KV
  p.seqlen_k = p.seqlen_q = 3968;
  EXPECT_EQ(schedule::resolve_schedule(ScheduleKind::kAuto, p), ScheduleKind::kFA3);  // 31 KV tiles
  p.seqlen_k = p.seqlen_q = 2048;
  EXPECT_EQ(schedule::resolve_schedule(ScheduleKind::kAuto, p), ScheduleKind::kFA3);  // 16 KV tiles
  p.seqlen_k = p.seqlen_q = 4096;
  EXPECT_EQ(schedule::resolve_schedule(ScheduleKind::kShift, p), ScheduleKind::kSymmetricShift);
  EXPECT_EQ(schedule::resolve_schedule(ScheduleKind::kFA3, p), ScheduleKind::kFA3);
  p.block_m = 128;  // hdim 64's 128 x 128 tiles: descending at every length
  for (int seqlen : {128, 512, 2048, 8064, 8192}) {
    p.seqlen_k = p.seqlen_q = seqlen;
    EXPECT_EQ(schedule::resolve_schedule(ScheduleKind::kAuto, p), ScheduleKind::kDescending) << seqlen;
  }
  p.block_m = p.block_n = 64;  // hdim 256's square tiles: fa3 ahead on causal heads of fewer than 64 KV tiles
  p.seqlen_k = p.seqlen_q = 4032;
  EXPECT_EQ(schedule::resolve_schedule(ScheduleKind::kAuto, p), ScheduleKind::kFA3);  // 63 KV tiles
  p.seqlen_k = p.seqlen_q = 4096;
  EXPECT_EQ(schedule::resolve_schedule(ScheduleKind::kAuto, p), ScheduleKind::kDescending);  // 64 KV tiles
  p.causal = false;
  p.seqlen_k = p.seqlen_q = 1024;
  EXPECT_EQ(schedule::resolve_schedule(ScheduleKind::kAuto, p), ScheduleKind::kDescending);
  // Walked GQA heads (default_chain_heads > 1) run descending even with square tiles.
  schedule::TileProblem g{4, 64, 8, 128, 128, true, 4096, 4096};
  EXPECT_EQ(schedule::resolve_schedule(ScheduleKind::kAuto, g), ScheduleKind::kDescending);
  g.heads_q = 8, g.heads_kv = 2;  // 8 / 2: no walk (it would leave fewer than 8 chain heads)
  g.block_m = g.block_n = 64, g.seqlen_q = g.seqlen_k = 2048;  // hdim 256's tiles, 32 KV tiles
  EXPECT_EQ(schedule::resolve_schedule(ScheduleKind::kAuto, g), ScheduleKind::kFA3);
}

}  // namespace
}  // namespace dash_attn::testing
