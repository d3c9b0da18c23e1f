// GQA chains that walk several q-heads of their KV head (Schedule::chain_heads):
// every (batch, q-head, KV tile, visible Q tile) is still visited once, the
// dQ and dK/dV ranks stay permutations, every wait targets an earlier claim,
// the simulated kernel is live on any worker count, and the default walk is
// a function of the head counts alone.
#include <gtest/gtest.h>

#include <algorithm>
#include <map>
#include <random>
#include <tuple>
#include <vector>

#include "dash_attn/schedule/resolve.hpp"
#include "dash_attn/schedule/schedule.hpp"
#include "model_liveness.hpp"
#include "schedule_test_problems.hpp"
#include "schedule_trace.hpp"

namespace dash_attn::testing {
namespace {

// The random problems with their heads replaced by 2 KV heads of `group` q-heads.
std::vector<std::pair<OwnedProblem, schedule::TileProblem>> grouped_problems(unsigned seed, int count, int group) {
  std::vector<std::pair<OwnedProblem, schedule::TileProblem>> out;
  for (OwnedProblem& owned : random_problems(seed, count)) out.emplace_back(owned, schedule::TileProblem{});
  for (auto& [owned, p] : out) {
    p = owned.get();
    p.heads_kv = 2;
    p.heads_q = 2 * group;
  }
  return out;
}

std::vector<int> divisors(int n) {
  std::vector<int> d;
  for (int i = 1; i <= n; ++i)
    if (n % i == 0) d.push_back(i);
  return d;
}

TEST(ScheduleGroupWalk, DefaultRuleReadsHeadCountsOnly) {
  schedule::TileProblem p{1, 32, 8, 64, 128, true, 4096, 4096};
  EXPECT_EQ(schedule::default_chain_heads(p), 4);  // Llama GQA 32/8: the whole group, 8 chain heads
  p.heads_q = 64;
  EXPECT_EQ(schedule::default_chain_heads(p), 8);  // GPT-OSS 64/8
  p.heads_q = 16;
  EXPECT_EQ(schedule::default_chain_heads(p), 2);  // Gemma 2 16/8
  p.heads_q = 32, p.heads_kv = 1;
  EXPECT_EQ(schedule::default_chain_heads(p), 4);  // MQA: cut to keep 8 chains per KV tile
  p.heads_q = 8;
  EXPECT_EQ(schedule::default_chain_heads(p), 1);
  p.heads_q = 12, p.heads_kv = 1;
  EXPECT_EQ(schedule::default_chain_heads(p), 1);  // 12 / 2 = 6 < 8 chains; 12 / 1 = 12
  p.heads_q = p.heads_kv = 32;
  EXPECT_EQ(schedule::default_chain_heads(p), 1);  // MHA
  // Lengths and batch never enter (a sequence's bits may not depend on its batch).
  schedule::TileProblem q{7, 32, 8, 64, 128, false, 100, 333};
  EXPECT_EQ(schedule::default_chain_heads(q), 4);
}

TEST(ScheduleGroupWalk, EveryVisibleTileOnceAndRanksArePermutations) {
  for (int group : {4, 6}) {
    for (const auto& [owned, p] : grouped_problems(21, 60, group)) {
      for (int chain_heads : divisors(group)) {
        for (ScheduleKind kind : kAllKinds) {
          const model::ScheduleTrace trace = model::build_trace(p, kind, false, chain_heads);
          const std::string what = owned.describe() + " " + std::string(to_string(kind)) + " walk " + std::to_string(chain_heads);
          ASSERT_EQ(trace.chain_heads, chain_heads);
          ASSERT_EQ(trace.reduces_dkv, chain_heads < group);
          std::map<std::tuple<int, int, int, int>, int> visits;
          std::vector<std::vector<int>> dq(trace.dq_contributors.size()), dkv(trace.num_dkv_tiles);
          for (const model::TraceChain& chain : trace.chains) {
            ASSERT_EQ(chain.head_q % chain_heads, 0) << what;
            ASSERT_EQ(chain.head_kv, chain.head_q / group) << what;
            dkv[chain.dkv_tile].push_back(chain.dkv_rank);
            for (const model::TraceStep& step : chain.steps) {
              ASSERT_GE(step.head_q, chain.head_q) << what;
              ASSERT_LT(step.head_q, chain.head_q + chain_heads) << what;
              ++visits[{chain.batch, step.head_q, chain.kv, step.q}];
              dq[step.dq_tile].push_back(step.rank);
            }
          }
          std::size_t expected = 0;
          for (int b = 0; b < p.batch; ++b) {
            const schedule::HeadTiles t = p.head_tiles(b);
            for (int h = 0; h < p.heads_q; ++h)
              for (int kv = 0; kv < t.kv_tiles(); ++kv)
                for (int q = t.q_begin(kv); q < t.q_tiles(); ++q) {
                  ++expected;
                  ASSERT_EQ((visits[{b, h, kv, q}]), 1) << what << " head " << h << " kv " << kv << " q " << q;
                }
          }
          ASSERT_EQ(visits.size(), expected) << what;
          if (trace.ordered) {
            for (std::size_t t = 0; t < dq.size(); ++t) {
              std::sort(dq[t].begin(), dq[t].end());
              ASSERT_EQ(static_cast<int>(dq[t].size()), trace.dq_contributors[t]) << what;
              for (std::size_t i = 0; i < dq[t].size(); ++i) ASSERT_EQ(dq[t][i], static_cast<int>(i)) << what;
            }
            // dK/dV: one add per chain of the group at each KV tile, ranks 0 .. group / chain_heads - 1.
            for (auto& ranks : dkv) {
              if (ranks.empty()) continue;  // a KV head of a sequence without KV tiles
              std::sort(ranks.begin(), ranks.end());
              ASSERT_EQ(static_cast<int>(ranks.size()), group / chain_heads) << what;
              for (std::size_t i = 0; i < ranks.size(); ++i) ASSERT_EQ(ranks[i], static_cast<int>(i)) << what;
            }
          }
        }
      }
    }
  }
}

// Chain schedules: the contribution a dQ or dK/dV add waits for (rank - 1 on
// the same tile) belongs to an earlier claim, so any grid is live.
TEST(ScheduleGroupWalk, EveryWaitTargetsAnEarlierClaim) {
  for (int group : {4, 6}) {
    for (const auto& [owned, p] : grouped_problems(22, 60, group)) {
      for (int chain_heads : divisors(group)) {
        for (ScheduleKind kind : {ScheduleKind::kFA3, ScheduleKind::kDescending, ScheduleKind::kAuto}) {
          const model::ScheduleTrace trace = model::build_trace(p, kind, false, chain_heads);
          if (trace.kind == ScheduleKind::kShift || trace.kind == ScheduleKind::kSymmetricShift) continue;
          const std::string what = owned.describe() + " " + std::string(to_string(trace.kind)) + " walk " + std::to_string(chain_heads);
          std::vector<int> item_of_chain(trace.chains.size());
          for (std::size_t i = 0; i < trace.items.size(); ++i)
            for (int c = 0; c < trace.items[i].num_chains; ++c) item_of_chain[trace.items[i].first_chain + c] = static_cast<int>(i);
          std::map<std::pair<int, int>, int> dq_claim, dkv_claim;  // (tile, rank) -> item
          for (std::size_t c = 0; c < trace.chains.size(); ++c) {
            const model::TraceChain& chain = trace.chains[c];
            dkv_claim[{chain.dkv_tile, chain.dkv_rank}] = item_of_chain[c];
            for (const model::TraceStep& step : chain.steps) dq_claim[{step.dq_tile, step.rank}] = item_of_chain[c];
          }
          for (const auto& [key, item] : dq_claim)
            if (key.second > 0) ASSERT_LT((dq_claim.at({key.first, key.second - 1})), item) << what;
          if (trace.reduces_dkv)
            for (const auto& [key, item] : dkv_claim)
              if (key.second > 0) ASSERT_LT((dkv_claim.at({key.first, key.second - 1})), item) << what;
        }
      }
    }
  }
}

// q-heads innermost exactly when every chain of a head starts at its last Q
// tile (atomic, descending, no window left bound); else one q-head's Q tiles
// after another.
TEST(ScheduleGroupWalk, PassOrderFollowsTheChainsStart) {
  schedule::TileProblem p{1, 16, 4, 64, 128, true, 1000, 1000};
  for (bool left_bound : {false, true}) {
    p.window_left = left_bound ? 300 : -1;
    p.window_right = left_bound ? 0 : -1;
    for (ScheduleKind kind : {ScheduleKind::kAtomic, ScheduleKind::kFA3, ScheduleKind::kDescending}) {
      const model::ScheduleTrace trace = model::build_trace(p, kind, false, 4);
      const bool innermost = !left_bound && kind != ScheduleKind::kFA3;
      const schedule::Schedule s(kind, 8, 4);
      EXPECT_EQ(s.heads_innermost(p.head_tiles(0)), innermost) << to_string(kind) << " left bound " << left_bound;
      for (const model::TraceChain& chain : trace.chains) {
        const int length = static_cast<int>(chain.steps.size()) / 4;
        for (int i = 0; i < static_cast<int>(chain.steps.size()); ++i) {
          const int pass = innermost ? i % 4 : i / length;
          ASSERT_EQ(chain.steps[i].head_q, chain.head_q + pass) << to_string(kind) << " step " << i;
          ASSERT_EQ(chain.steps[i].q, chain.steps[innermost ? i / 4 * 4 : i % length].q) << to_string(kind);
        }
      }
    }
  }
}

TEST(ScheduleGroupWalk, LiveOnAnyWorkerCount) {
  std::mt19937 rng(23);
  for (const auto& [owned, p] : grouped_problems(24, 25, 4)) {
    for (int chain_heads : {2, 4}) {
      for (ScheduleKind kind : {ScheduleKind::kAtomic, ScheduleKind::kFA3, ScheduleKind::kDescending}) {
        const model::ScheduleTrace trace = model::build_trace(p, kind, false, chain_heads);
        expect_live(trace, rng, owned.describe() + " " + std::string(to_string(kind)) + " walk " + std::to_string(chain_heads));
      }
    }
  }
}

// The kernel's decoder and the walk agree: item k's chains start at a
// multiple of chain_heads, and the claim order lists every (batch, chain
// head, item index) once.
TEST(ScheduleGroupWalk, ClaimsCoverEveryChainHeadOnce) {
  for (const auto& [owned, p] : grouped_problems(25, 60, 6)) {
    for (int chain_heads : divisors(6)) {
      for (ScheduleKind kind : kAllKinds) {
        const ScheduleKind resolved = schedule::resolve_schedule(kind, p);
        const schedule::Schedule s(resolved, schedule::claim_interleave(resolved, p, chain_heads), chain_heads);
        std::map<std::tuple<int, int, int>, int> seen;
        for (int k = 0; k < s.total_items(p); ++k) {
          const schedule::WorkItem item = s.work_item(p, k);
          ASSERT_EQ(item.head_q % chain_heads, 0) << owned.describe();
          ASSERT_EQ(item.head_kv, item.head_q / 6) << owned.describe();
          ++seen[{item.batch, item.head_q, item.index_in_head}];
        }
        std::size_t expected = 0;
        for (int b = 0; b < p.batch; ++b) expected += static_cast<std::size_t>(s.chain_spans(p)) * s.items_per_head(p.head_tiles(b));
        ASSERT_EQ(seen.size(), expected) << owned.describe();
        for (const auto& [key, n] : seen) ASSERT_EQ(n, 1) << owned.describe();
      }
    }
  }
}

}  // namespace
}  // namespace dash_attn::testing
