// Schedules over ragged work (issue 17, point 2): a varlen batch's chains,
// its longest-first claim order, per-sequence dQ ranks that do not depend on
// the rest of the batch, liveness for any worker count, and the model's
// makespan against in-order claims on a long-tailed batch.
#include <gtest/gtest.h>

#include <algorithm>
#include <map>
#include <cstdio>
#include <random>
#include <set>
#include <tuple>
#include <utility>
#include <vector>

#include "calibration.hpp"
#include "lower_bound.hpp"
#include "model_liveness.hpp"
#include "dash_attn/schedule/varlen_claim_order.hpp"
#include "dash_attn/schedule/varlen_problem.hpp"
#include "simulate.hpp"
#include "varlen_trace.hpp"

namespace dash_attn::testing {
namespace {

using Lengths = std::vector<std::pair<int, int>>;
using schedule::VarlenClaims;

struct Shape {
  int heads_q, heads_kv, block_m, block_n;
  bool causal;
};

// Lengths at the edges: 0, 1, a tile +-1, seqlen_q != seqlen_k both ways;
// some twice or three times, apart, so that the kernel's order has runs of
// equal lengths to deal across (Schedule::work_item_of_run).
Lengths edge_lengths(int block) {
  return {{0, 0}, {0, 5}, {5, 0}, {1, 1}, {block - 1, block + 1}, {block, block}, {block + 1, block - 1},
          {3 * block + 7, block}, {block, 3 * block + 7}, {1, 4 * block}, {4 * block, 1}, {2 * block, 2 * block},
          {block, block}, {1, 1}, {2 * block, 2 * block}, {block, block}, {0, 0}};
}

std::vector<Shape> shapes() {
  std::vector<Shape> out;
  for (bool causal : {false, true})
    for (auto [m, n] : {std::pair{64, 128}, std::pair{128, 128}, std::pair{128, 64}})
      for (auto [hq, hkv] : {std::pair{1, 1}, std::pair{4, 2}, std::pair{3, 1}}) out.push_back({hq, hkv, m, n, causal});
  return out;
}

model::VarlenBatch batch_of(const Lengths& lengths, const Shape& s, int offset_q = 0, int offset_k = 0) {
  return model::VarlenBatch(lengths, s.heads_q, s.heads_kv, s.block_m, s.block_n, s.causal, offset_q, offset_k);
}

TEST(VarlenSchedule, EveryContributionAppearsExactlyOnce) {
  for (const Shape& s : shapes())
    for (VarlenClaims claims : {VarlenClaims::kLongestFirst, VarlenClaims::kLongestSequenceFirst, VarlenClaims::kInOrder}) {
      const model::VarlenBatch batch = batch_of(edge_lengths(s.block_m), s);
      const schedule::VarlenProblem p = batch.get();
      const model::ScheduleTrace trace = model::build_varlen_trace(p, claims);
      std::set<std::tuple<int, int, int>> chains;         // (sequence, head, kv)
      std::set<std::tuple<int, int, int, int>> visited;   // (sequence, head, kv, q)
      for (const model::TraceChain& c : trace.chains) {
        EXPECT_TRUE(chains.insert({c.batch, c.head_q, c.kv}).second);
        for (const model::TraceStep& st : c.steps) EXPECT_TRUE(visited.insert({c.batch, c.head_q, c.kv, st.q}).second);
      }
      // What the mask rule says should be there, straight from HeadTiles.
      std::size_t want_chains = 0, want_steps = 0;
      for (int seq = 0; seq < p.batch; ++seq) {
        const schedule::HeadTiles t = p.head_tiles(seq);
        want_chains += static_cast<std::size_t>(p.heads_q * t.kv_tiles());
        for (int h = 0; h < p.heads_q; ++h)
          for (int q = 0; q < t.q_tiles(); ++q)
            for (int kv = 0; kv < t.kv_end(q); ++kv) {
              ++want_steps;
              EXPECT_TRUE(visited.count({seq, h, kv, q})) << seq << " " << h << " " << kv << " " << q;
            }
      }
      EXPECT_EQ(chains.size(), want_chains);
      EXPECT_EQ(visited.size(), want_steps);
    }
}

TEST(VarlenSchedule, RanksOfADqTileAreAPermutationOfItsContributors) {
  for (const Shape& s : shapes()) {
    const model::VarlenBatch batch = batch_of(edge_lengths(s.block_m), s);
    const model::ScheduleTrace trace = model::build_varlen_trace(batch.get(), VarlenClaims::kLongestFirst);
    std::map<int, std::vector<int>> ranks;  // per dQ tile
    for (const model::TraceChain& c : trace.chains)
      for (const model::TraceStep& st : c.steps) ranks[st.dq_tile].push_back(st.rank);
    for (auto& [tile, r] : ranks) {
      std::sort(r.begin(), r.end());
      ASSERT_EQ(static_cast<int>(r.size()), trace.dq_contributors[tile]);
      for (int i = 0; i < static_cast<int>(r.size()); ++i) EXPECT_EQ(r[i], i);
    }
  }
}

TEST(VarlenSchedule, ClaimsGoLongestFirstWithDeterministicTies) {
  for (const Shape& s : shapes()) {
    const model::VarlenBatch batch = batch_of(edge_lengths(s.block_m), s);
    const schedule::VarlenProblem p = batch.get();
    const std::vector<schedule::VarlenChain> order = schedule::varlen_claim_order(p, VarlenClaims::kLongestFirst);
    ASSERT_EQ(order.size(), schedule::varlen_chains(p).size());
    for (std::size_t i = 1; i < order.size(); ++i) {
      const auto& a = order[i - 1];
      const auto& b = order[i];
      ASSERT_GE(p.chain_length(a), p.chain_length(b));
      if (p.chain_length(a) == p.chain_length(b))
        ASSERT_LT(std::tie(a.sequence, a.kv, a.head_q), std::tie(b.sequence, b.kv, b.head_q));
    }
  }
}

// The packing-invariance property: a sequence's ranks (hence its dQ bits)
// are the same wherever it sits in whatever batch.
TEST(VarlenSchedule, ASequencesRanksDoNotDependOnTheRestOfTheBatch) {
  std::mt19937 rng(17);
  std::uniform_int_distribution<int> len(0, 700);
  for (const Shape& s : shapes())
    for (const std::pair<int, int>& probe : Lengths{{1, 1}, {300, 300}, {129, 511}, {640, 63}, {0, 200}}) {
      std::vector<std::map<std::tuple<int, int, int>, int>> seen;  // per placement: (head, kv, q) -> rank
      for (int placement = 0; placement < 4; ++placement) {
        Lengths lengths;
        const int before = placement, after = 3 - placement + static_cast<int>(rng() % 3);
        for (int i = 0; i < before; ++i) lengths.push_back({len(rng), len(rng)});
        lengths.push_back(probe);
        for (int i = 0; i < after; ++i) lengths.push_back({len(rng), len(rng)});
        const model::VarlenBatch batch = batch_of(lengths, s, 1000 * placement + 3, 77 * placement);
        std::map<std::tuple<int, int, int>, int> ranks;
        for (const model::TraceChain& c : model::build_varlen_trace(batch.get(), VarlenClaims::kLongestFirst).chains)
          if (c.batch == before)
            for (const model::TraceStep& st : c.steps) ranks[{c.head_q, c.kv, st.q}] = st.rank;
        seen.push_back(std::move(ranks));
      }
      for (std::size_t i = 1; i < seen.size(); ++i) EXPECT_EQ(seen[i], seen[0]);
    }
}

// The kernel's order over sequences of one length is the fixed-length
// batch's: a run is dealt like an equal-length batch of its sequences, so a
// wide causal tile's 32 interleaved heads span several sequences instead of
// stopping at each sequence's chain heads.
TEST(VarlenSchedule, EqualLengthRunsClaimLikeAFixedLengthBatch) {
  for (const Shape& s : shapes()) {
    const int length = 3 * s.block_m + 5;
    const model::VarlenBatch batch = batch_of(Lengths(6, {length, length}), s);
    const std::vector<schedule::VarlenChain> order =
        schedule::varlen_claim_order(batch.get(), VarlenClaims::kLongestSequenceFirst);
    const schedule::TileProblem fixed{6, s.heads_q, s.heads_kv, s.block_m, s.block_n, s.causal, length, length};
    const schedule::Schedule descending(ScheduleKind::kDescending, fixed);
    ASSERT_EQ(static_cast<int>(order.size()), descending.total_items(fixed));
    for (int k = 0; k < descending.total_items(fixed); ++k) {
      const schedule::WorkItem item = descending.work_item(fixed, k);
      EXPECT_EQ(order[k].sequence, item.batch) << k;
      EXPECT_EQ(order[k].head_q, item.head_q) << k;
      EXPECT_EQ(order[k].kv, item.kv[0]) << k;
    }
  }
}

TEST(VarlenSchedule, LiveWithAnyNumberOfWorkers) {
  std::mt19937 rng(5);
  for (const Shape& s : shapes())
    for (VarlenClaims claims : {VarlenClaims::kLongestFirst, VarlenClaims::kLongestSequenceFirst, VarlenClaims::kInOrder}) {
      const model::VarlenBatch batch = batch_of(edge_lengths(s.block_m / 2), s);
      expect_live(model::build_varlen_trace(batch.get(), claims), rng, "varlen");
    }
}

// One 8k sequence among 63 short ones (256-512), hdim 128's tiles and
// calibrated costs (docs/schedules.md, c91b5f7), 16 heads on 132 workers.
Lengths long_tailed_batch(int long_at) {
  Lengths lengths;
  for (int i = 0; i < 63; ++i) {
    const int l = 256 + (i * 97) % 257;
    lengths.push_back({l, l});
  }
  lengths.insert(lengths.begin() + long_at, {8192, 8192});
  return lengths;
}

struct Modeled {
  double makespan, lower_bound;
};

Modeled model_run(const Lengths& lengths, bool causal, VarlenClaims claims, int workers) {
  const model::VarlenBatch batch(lengths, 16, 16, 64, 128, causal);
  const model::CostModel cost = model::kernel_cost_model(2.61, 3.45, 0.65, 2.61, 11.18);
  const model::ScheduleTrace trace = model::build_varlen_trace(batch.get(), claims);
  const model::SimResult r = model::simulate(trace, workers, model::Assignment::kDynamic, cost);
  EXPECT_FALSE(r.deadlock) << r.deadlock_reason;
  return {r.makespan, model::lower_bound(trace, workers, cost).value};
}

TEST(VarlenSchedule, LongestFirstBeatsInOrderOnALongTailedBatch) {
  for (bool causal : {true, false})
    for (int long_at : {0, 40, 63}) {
      const Modeled longest = model_run(long_tailed_batch(long_at), causal, VarlenClaims::kLongestFirst, 132);
      const Modeled in_order = model_run(long_tailed_batch(long_at), causal, VarlenClaims::kInOrder, 132);
      const Modeled kernel = model_run(long_tailed_batch(long_at), causal, VarlenClaims::kLongestSequenceFirst, 132);
      std::printf("long-tailed %s, 8k at %d, 132 workers: longest-first %.0f us, longest sequence first (kernel) "
                  "%.0f us, in-order %.0f us (%.2fx), lower bound %.0f us\n",
                  causal ? "causal" : "full", long_at, longest.makespan, kernel.makespan, in_order.makespan,
                  in_order.makespan / longest.makespan, longest.lower_bound);
      EXPECT_LT(longest.makespan, in_order.makespan);
      // The long sequence anywhere but first: the kernel's order starts it at once too.
      if (long_at > 0) EXPECT_LT(kernel.makespan, in_order.makespan);
    }
}

}  // namespace
}  // namespace dash_attn::testing
