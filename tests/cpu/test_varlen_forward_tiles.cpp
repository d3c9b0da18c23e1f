// schedule::VarlenForwardTiles on host arrays: the order covers every query
// tile of every sequence once, with rows inside the packed tensors even when
// the length arrays are bad (non-monotone, past the tensor, seqused larger
// than the slot); the claim rule draws max(tiles, grid) claims whatever the
// grid. The kernel's warp scan (common/sequence_scan_sm90.hpp) finds tile t of
// this same order; its agreement with the order is a GPU test
// (test_forward_varlen.cu: every sequence's bits equal its run alone).
#include <gtest/gtest.h>

#include <cstdint>
#include <set>
#include <tuple>
#include <vector>

#include "dash_attn/schedule/varlen_forward_tiles.hpp"

namespace dash_attn::schedule {
namespace {

VarlenForwardTiles tiles_over(const std::vector<int32_t>& cu_q, const std::vector<int32_t>& cu_k,
                              const std::vector<int32_t>* used_q, int total_q, int total_k, int heads, int grid) {
  VarlenForwardTiles t;
  t.tile = TileShape{128, 128};
  t.batch = static_cast<int>(cu_q.size()) - 1;
  t.heads = heads;
  t.total_q = total_q;
  t.total_k = total_k;
  t.grid = grid;
  t.cu_seqlens_q = cu_q.data();
  t.cu_seqlens_k = cu_k.data();
  t.seqused_q = used_q != nullptr ? used_q->data() : nullptr;
  return t;
}

// Every tile index of the order, in order, by the host's own walk.
std::vector<VarlenForwardWork> walk(const VarlenForwardTiles& t) {
  std::vector<VarlenForwardWork> all;
  for (int s = 0; s < t.batch; ++s)
    for (int local = 0; local < t.tiles_of(s); ++local) all.push_back(t.work(s, local));
  return all;
}

TEST(VarlenForwardTiles, CoversEveryTileOnceInsideTheTensors) {
  // Lengths 0, 1, 127, 128, 129, 300, then 5 again.
  const std::vector<int32_t> cu_q{0, 0, 1, 128, 256, 385, 685, 690}, cu_k{0, 3, 4, 131, 259, 388, 688, 693};
  const VarlenForwardTiles t = tiles_over(cu_q, cu_k, nullptr, 690, 693, 3, 8);
  const std::vector<VarlenForwardWork> all = walk(t);
  std::set<std::tuple<int, int, int>> seen;
  int expected = 0;
  for (int s = 0; s < t.batch; ++s) expected += 3 * ((cu_q[s + 1] - cu_q[s] + 127) / 128);
  ASSERT_EQ(static_cast<int>(all.size()), expected);
  for (size_t i = 0; i < all.size(); ++i) {
    const VarlenForwardWork& w = all[i];
    EXPECT_TRUE(seen.insert({w.sequence, w.head, w.m_block}).second) << "tile " << i << " twice";
    EXPECT_EQ(w.q_offset, cu_q[w.sequence]);
    EXPECT_EQ(w.seqlen_q, cu_q[w.sequence + 1] - cu_q[w.sequence]);
    EXPECT_EQ(w.k_offset, cu_k[w.sequence]);
    EXPECT_EQ(w.seqlen_k, cu_k[w.sequence + 1] - cu_k[w.sequence]);
    EXPECT_GE(w.m_block, 0);
    EXPECT_LT(w.m_block * 128, w.seqlen_q);
    // Inside a sequence: descending m_block, the heads of one m_block side by side.
    if (i > 0 && all[i - 1].sequence == w.sequence)
      EXPECT_TRUE(all[i - 1].m_block > w.m_block || (all[i - 1].m_block == w.m_block && all[i - 1].head + 1 == w.head));
  }
}

TEST(VarlenForwardTiles, BadArraysGiveRowsInsideTheTensors) {
  // Decreasing entries, entries past total_q, negative ones; seqused beyond its slot.
  const std::vector<int32_t> cu_q{-50, 100, 40, 900, 1000}, cu_k{0, 10, 5, 2000, -3};
  const std::vector<int32_t> used_q{500, 7, -4, 3};
  for (const std::vector<int32_t>* used : {static_cast<const std::vector<int32_t>*>(nullptr), &used_q}) {
    const VarlenForwardTiles t = tiles_over(cu_q, cu_k, used, 600, 700, 2, 4);
    for (const VarlenForwardWork& w : walk(t)) {
      EXPECT_GE(w.q_offset, 0);
      EXPECT_LE(w.q_offset + w.seqlen_q, 600);
      EXPECT_GE(w.k_offset, 0);
      EXPECT_LE(w.k_offset + w.seqlen_k, 700);
      EXPECT_GE(w.seqlen_k, 0);
    }
  }
}

TEST(VarlenForwardTiles, ClaimsEndWithOneEmptyHandedClaimPerCta) {
  // Each CTA takes its first tile (if any), then claims until a claim comes
  // back past the batch; the claims drawn are 0 .. max(tiles, grid) - 1 and
  // exactly the last one satisfies is_last_claim.
  for (int tiles : {0, 1, 5, 64, 200})
    for (int grid : {1, 3, 64, 132}) {
      int claims = 0, last_claims = 0;
      std::vector<bool> done(grid, false);
      // Round-robin interleaving of the CTAs' claims.
      for (int live = grid; live > 0;)
        for (int cta = 0; cta < grid; ++cta) {
          if (done[cta]) continue;
          const int claim = claims++;
          if (VarlenForwardTiles::is_last_claim(claim, tiles, grid)) ++last_claims;
          if (grid + claim >= tiles) done[cta] = true, --live;
        }
      EXPECT_EQ(claims, std::max(tiles, grid)) << tiles << " tiles, grid " << grid;
      EXPECT_EQ(last_claims, 1) << tiles << " tiles, grid " << grid;
    }
}

}  // namespace
}  // namespace dash_attn::schedule
