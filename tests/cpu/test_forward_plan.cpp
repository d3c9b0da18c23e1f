// The forward work partition against brute force: every query tile is
// visited exactly once, causal sections start with their longest tiles, the
// dynamic claims take every tile once and leave the counter at zero, and
// the key-tile ranges and mask flags agree with the reference mask.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <set>
#include <tuple>
#include <utility>
#include <vector>

#include "attention_reference.hpp"
#include "dash_attn/plan/forward_plan.hpp"

#include "common/masked_shape.hpp"

namespace dash_attn::host {
namespace {

using PlanCase = testing::MaskedShape;
using schedule::ForwardPlan;
using schedule::ForwardWorkTile;

class ForwardPlanTest : public ::testing::TestWithParam<PlanCase> {};

TEST_P(ForwardPlanTest, VisitsEveryTileOnceLongestFirstWithinSections) {
  const PlanCase& c = GetParam();
  const ForwardPlan p = plan_forward(c.shape, c.causal, 132);
  EXPECT_EQ(p.tiles, p.m_blocks * c.shape.batch * c.shape.heads_q);
  EXPECT_EQ(p.grid, std::min(p.tiles, 132));
  std::set<std::tuple<int, int, int>> seen;
  for (int i = 0; i < p.tiles; ++i) {
    const ForwardWorkTile w = p.work_tile(i);
    ASSERT_GE(w.m_block, 0);
    ASSERT_LT(w.m_block, p.m_blocks);
    ASSERT_LT(w.head, c.shape.heads_q);
    ASSERT_LT(w.batch, c.shape.batch);
    ASSERT_TRUE(seen.insert({w.m_block, w.head, w.batch}).second) << "tile " << i << " visited twice";
    // Inside a section the order goes by descending m_block (longest first).
    const int last_first_tile = p.sections.last_first_head * p.m_blocks;
    const int section_tiles = p.sections.heads_per_section * p.m_blocks;
    const bool first_of_section = i < last_first_tile ? i % section_tiles == 0 : i == last_first_tile;
    if (!first_of_section) EXPECT_LE(w.m_block, p.work_tile(i - 1).m_block) << "tile " << i;
  }
}

// The dynamic schedule, run as an event simulation with the kernel's protocol:
// each CTA starts with first_tile(cta); when a CTA finishes a tile (cost(index,
// cta)) it draws the counter and takes claimed_tile().
struct ClaimRun {
  long long makespan = 0;
  int claims = 0, resets = 0, counter_at_end = 0;
  std::vector<int> taken;  // times each tile was taken
};
template <class Cost>
ClaimRun simulate_claims(const ForwardPlan& p, Cost cost) {
  ClaimRun run;
  run.taken.assign(p.tiles, 0);
  int counter = 0;
  // (finish time, cta, tile) of the tile each CTA is on.
  std::set<std::tuple<long long, int, int>> running;
  for (int cta = 0; cta < p.grid; ++cta) {
    const int tile = p.first_tile(cta);
    ++run.taken[tile];
    running.insert({cost(tile, cta), cta, tile});
  }
  while (!running.empty()) {
    const auto [time, cta, tile] = *running.begin();
    running.erase(running.begin());
    run.makespan = std::max(run.makespan, time);
    const int claim = counter++;
    ++run.claims;
    if (p.is_last_claim(claim)) {
      counter = 0;
      ++run.resets;
    }
    const int next = p.claimed_tile(claim);
    if (next >= p.tiles) continue;
    ++run.taken[next];
    running.insert({time + cost(next, cta), cta, next});
  }
  run.counter_at_end = counter;
  return run;
}

// Every tile is taken exactly once (with a per-CTA jitter in the costs so
// claims interleave differently), the claims are 0 .. tiles - 1, the last
// claim resets the counter, and under a causal mask the makespan is no worse
// than the static round robin.
TEST_P(ForwardPlanTest, DynamicClaimsTakeEveryTileOnceAndResetTheCounter) {
  const PlanCase& c = GetParam();
  for (int sm_count : {1, 7, 132}) {
    const ForwardPlan p = plan_forward(c.shape, c.causal, sm_count);
    ASSERT_LE(p.grid, p.tiles);
    auto cost = [&](int index, int cta) {
      return 16ll * (p.n_block_end(p.work_tile(index).m_block) + 1) + (cta * 7 + index) % 5;
    };
    const ClaimRun run = simulate_claims(p, cost);
    EXPECT_EQ(run.claims, p.tiles) << "grid " << p.grid;
    EXPECT_EQ(run.resets, 1);
    EXPECT_EQ(run.counter_at_end, 0);
    for (int i = 0; i < p.tiles; ++i) ASSERT_EQ(run.taken[i], 1) << "tile " << i << " grid " << p.grid;

    long long static_end = 0;
    for (int cta = 0; cta < p.grid; ++cta) {
      long long t = 0;
      for (int i = p.first_tile(cta); i < p.tiles; i = p.static_next_tile(i)) t += cost(i, cta);
      static_end = std::max(static_end, t);
    }
    if (c.causal) EXPECT_LE(run.makespan, static_end) << "grid " << p.grid;
  }
}

// The sections' order keeps the causal launch balanced: on the standard
// grid's causal rows (16k tokens, hidden 2048) and the GQA rows, a tile costing
// its key tiles plus 1.5 for its prologue and epilogue, the dynamic claims end
// within 3% of the average CTA's work on 132 SMs. Without the last-section
// rule one-wave sections ended 4-8% over it at 1k-8k (a short last section's
// longest tiles started last; docs/perf_log.md 2026-12-06).
TEST(ForwardPlan, CausalClaimsEndWithinThreePercentOfTheMeanWork) {
  std::vector<ProblemShape> shapes;
  for (int head_dim : {64, 128})
    for (int seqlen = 512; seqlen <= 16384; seqlen *= 2)
      shapes.push_back(ProblemShape{16384 / seqlen, seqlen, seqlen, 2048 / head_dim, 2048 / head_dim, head_dim});
  for (int seqlen : {4096, 8192, 16384}) shapes.push_back(ProblemShape{16384 / seqlen, seqlen, seqlen, 32, 8, 128});
  for (const ProblemShape& s : shapes) {
    const ForwardPlan p = plan_forward(s, true, 132);
    auto cost = [&](int index, int) { return 2ll * p.n_block_end(p.work_tile(index).m_block) + 3; };
    long long work = 0;
    for (int i = 0; i < p.tiles; ++i) work += cost(i, 0);
    const double mean = static_cast<double>(work) / p.grid;
    EXPECT_LE(simulate_claims(p, cost).makespan, 1.03 * mean)
        << "hdim " << s.head_dim << " seqlen " << s.seqlen_q << " heads " << s.heads_q << "/" << s.heads_kv;
  }
}

TEST_P(ForwardPlanTest, KeyRangesAndMaskFlagsMatchTheReferenceMask) {
  const PlanCase& c = GetParam();
  const ProblemShape& s = c.shape;
  const ForwardPlan p = plan_forward(s, c.causal, 132);
  for (int m = 0; m < p.m_blocks; ++m) {
    const int64_t row_end = std::min<int64_t>((m + 1) * p.tile.block_m, s.seqlen_q);
    int64_t keys_needed = 0;  // one past the last key some row of the tile sees
    for (int64_t row = m * p.tile.block_m; row < row_end; ++row)
      for (int64_t key = 0; key < s.seqlen_k; ++key)
        if (reference::key_visible(row, key, s.seqlen_q, s.seqlen_k, c.causal)) keys_needed = std::max(keys_needed, key + 1);
    EXPECT_EQ(p.n_block_end(m), (keys_needed + p.tile.block_n - 1) / p.tile.block_n) << "m_block " << m;
    for (int n = 0; n < p.n_block_end(m); ++n) {
      bool masked = false;
      for (int64_t row = m * p.tile.block_m; row < row_end && !masked; ++row)
        for (int64_t key = n * p.tile.block_n; key < (n + 1) * p.tile.block_n && !masked; ++key)
          masked = key >= s.seqlen_k || !reference::key_visible(row, key, s.seqlen_q, s.seqlen_k, c.causal);
      EXPECT_EQ(p.needs_mask(m, n), masked) << "m_block " << m << " n_block " << n;
    }
  }
}

std::vector<PlanCase> plan_cases() {
  std::vector<PlanCase> cases;
  for (bool causal : {false, true}) {
    cases.push_back({ProblemShape{2, 257, 257, 4, 2, 128}, causal});
    cases.push_back({ProblemShape{1, 300, 113, 2, 2, 64}, causal});
    cases.push_back({ProblemShape{1, 113, 300, 2, 1, 256}, causal});
    cases.push_back({ProblemShape{1, 161, 161, 2, 1, 256}, causal});  // 80-key tiles, a tail of 1
    cases.push_back({ProblemShape{3, 1, 1, 5, 5, 64}, causal});
    // K/V of 4 MB per head: 8-head sections, the last one partial (12 = 8 + 4).
    cases.push_back({ProblemShape{3, 640, 8192, 4, 4, 128}, causal});
    // hdim 64's tall tile (192 rows) under both masks: the causal one from 2048 rows.
    cases.push_back({ProblemShape{1, 2100, 2049, 2, 1, 64}, causal});
  }
  return cases;
}

INSTANTIATE_TEST_SUITE_P(Shapes, ForwardPlanTest, ::testing::ValuesIn(plan_cases()));

TEST(ForwardPlan, SectionsKeepKeysAndValuesWithinTheL2Budget) {
  // 2 * 8192 * 128 * 2 bytes = 4 MB per head: 2 heads in the 8 MB budget, but
  // a wave of 132 tiles needs 3 heads of 64 query tiles; banded masks alike.
  const ProblemShape s{3, 8192, 8192, 4, 4, 128};
  EXPECT_EQ(plan_forward(s, false, 132).sections.heads_per_section, 3);
  EXPECT_EQ(plan_forward(s, true, 132).sections.heads_per_section, 3);
  EXPECT_EQ(plan_forward(s, false, 132, 1000, 0).sections.heads_per_section, 3);
  // Four query heads share one 4 MB K/V head: 1 MB each, so 8 heads fit.
  const ProblemShape gqa{3, 8192, 8192, 8, 2, 128};
  EXPECT_EQ(plan_forward(gqa, false, 132).sections.heads_per_section, 8);
  // Short sequences: the budget allows all 12 heads of 5 tiles (60 tiles, one partial wave).
  EXPECT_EQ(plan_forward(ProblemShape{3, 640, 640, 4, 4, 128}, false, 132).sections.heads_per_section, 12);
}

// The launch's last tiles are short under a banded mask: the last section
// holds at least 2 m / (m + 1) waves (ceil(2 grid / (m + 1)) heads); under a
// full mask it is the remainder.
TEST(ForwardPlan, TheLastBandedSectionSpansItsLongestTile) {
  // hdim 128 causal 2k, 8 x 16 heads: 16 query tiles per head, one-wave
  // sections of 9 heads; the last needs ceil(264 / 17) = 16 heads, so it
  // starts after 12 sections and holds 20.
  const ProblemShape s{8, 2048, 2048, 16, 16, 128};
  const schedule::ForwardPlan causal = plan_forward(s, true, 132);
  EXPECT_EQ(causal.sections.heads_per_section, 9);
  EXPECT_EQ(causal.sections.last_first_head, 108);
  for (int i = 0; i < 20; ++i) {
    const ForwardWorkTile w = causal.work_tile(108 * 16 + i);
    EXPECT_EQ(w.m_block, 15);
    EXPECT_EQ(w.batch * 16 + w.head, 108 + i);
  }
  const ForwardWorkTile before = causal.work_tile(108 * 16 - 1);
  EXPECT_EQ(before.m_block, 0);
  EXPECT_EQ(before.batch * 16 + before.head, 107);
  // Full mask: the same sections, the last one the 2 heads left over.
  EXPECT_EQ(plan_forward(s, false, 132).sections.last_first_head, 126);
  // Fewer heads than the last section needs: one section.
  EXPECT_EQ(plan_forward(ProblemShape{1, 2048, 2048, 16, 16, 128}, true, 132).sections.last_first_head, 0);
}

// A varlen sequence's tiles go in the order the same sequence alone takes
// (its heads in the same L2 sections), whatever its neighbours: a long
// sequence in sections, short ones with every head side by side.
TEST(ForwardPlan, VarlenSequencesTakeTheSectionsOfTheSequenceAlone) {
  for (const auto& [seqlen, heads_kv] : {std::pair{8192, 4}, std::pair{8192, 1}, std::pair{512, 4}, std::pair{3000, 2}}) {
    const ProblemShape alone{1, seqlen, seqlen, 4, heads_kv, 128};
    const ForwardPlan fixed = plan_forward(alone, false, 132);
    // The sequence between a short one and a long one.
    const std::vector<int32_t> cu{0, 100, 100 + seqlen, 100 + seqlen + 9000};
    const VarlenLengths lengths{cu.back(), cu.back(), cu.data(), cu.data(), nullptr, nullptr};
    const schedule::VarlenForwardTiles varlen =
        plan_forward_varlen(ProblemShape{3, 9000, 9000, 4, heads_kv, 128}, lengths, false, 132);
    ASSERT_EQ(varlen.tiles_of(1), fixed.tiles);
    for (int i = 0; i < fixed.tiles; ++i) {
      const ForwardWorkTile f = fixed.work_tile(i);
      const schedule::VarlenForwardWork v = varlen.work(1, i);
      EXPECT_EQ(v.m_block, f.m_block) << seqlen << " rows, tile " << i;
      EXPECT_EQ(v.head, f.head) << seqlen << " rows, tile " << i;
    }
  }
}

// forward_tile_for: hdim 64 runs the 192-row tile except on banded masks
// (causal or a window) under 2048 query rows; other head dims have one tile.
// A varlen batch decides on its max_seqlen_q (shape.seqlen_q).
TEST(ForwardPlan, Hdim64RunsTheTallTileExceptOnShortBandedMasks) {
  auto rows = [](int64_t seqlen_q, int64_t head_dim, bool causal, int window_left = -1, int window_right = -1) {
    return plan_forward(ProblemShape{1, seqlen_q, seqlen_q, 2, 1, head_dim}, causal, 132, window_left, window_right)
        .tile.block_m;
  };
  EXPECT_EQ(rows(512, 64, false), 192);
  EXPECT_EQ(rows(2047, 64, true), 128);
  EXPECT_EQ(rows(2048, 64, true), 192);
  EXPECT_EQ(rows(1000, 64, false, 256, -1), 128);  // a window is banded
  EXPECT_EQ(rows(1000, 64, false, -1, 0), 128);
  EXPECT_EQ(rows(4096, 64, false, 256, 0), 192);
  for (int64_t head_dim : {128, 256})
    for (bool causal : {false, true}) EXPECT_EQ(rows(4096, head_dim, causal), 128) << head_dim;
  // Keys per tile: 128 at hdim 64 and 128, 80 at hdim 256, under every mask.
  for (bool causal : {false, true})
    for (int64_t seqlen : {100, 4096})
      for (const auto& [head_dim, block_n] : {std::pair{64, 128}, std::pair{128, 128}, std::pair{256, 80}})
        EXPECT_EQ(plan_forward(ProblemShape{1, seqlen, seqlen, 2, 1, head_dim}, causal, 132).tile.block_n, block_n)
            << head_dim;
  const VarlenLengths lengths{3000, 3000, nullptr, nullptr, nullptr, nullptr};
  EXPECT_EQ(plan_forward_varlen(ProblemShape{3, 2100, 2100, 2, 1, 64}, lengths, true, 132).tile.block_m, 192);
  EXPECT_EQ(plan_forward_varlen(ProblemShape{3, 1500, 2100, 2, 1, 64}, lengths, true, 132).tile.block_m, 128);
}

}  // namespace
}  // namespace dash_attn::host
