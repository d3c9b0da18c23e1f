// Mask trip counts (bottom-right causal, block_m != block_n) against an
// element-by-element mask, and the wave split.
#include <gtest/gtest.h>

#include "dash_attn/schedule/head_tiles.hpp"
#include "dash_attn/schedule/waves.hpp"

namespace dash_attn::schedule {
namespace {

// Does Q tile q see any key of KV tile kv; is any pair inside masked?
struct TileTruth {
  bool visible = false, partial = false;
};

TileTruth truth(const HeadTiles& t, int q, int kv) {
  TileTruth out;
  for (int r = q * t.block_m; r < (q + 1) * t.block_m; ++r)
    for (int c = kv * t.block_n; c < (kv + 1) * t.block_n; ++c) {
      const bool inside = r < t.seqlen_q && c < t.seqlen_k;
      const bool allowed = inside && (!t.causal || c <= r + t.seqlen_k - t.seqlen_q);
      out.visible = out.visible || allowed;
      out.partial = out.partial || (r < t.seqlen_q && !allowed);
    }
  return out;
}

TEST(HeadTiles, TripCountsMatchTheElementMask) {
  const int blocks[][2] = {{64, 128}, {128, 64}, {48, 32}, {16, 16}, {32, 80}};
  for (const auto& block : blocks)
    for (int sq : {1, 15, 64, 100, 257})
      for (int sk : {1, 16, 63, 128, 300})
        for (bool causal : {false, true}) {
          const HeadTiles t{sq, sk, block[0], block[1], causal};
          for (int kv = 0; kv < t.kv_tiles(); ++kv) {
            int first = t.q_tiles();
            for (int q = t.q_tiles() - 1; q >= 0; --q)
              if (truth(t, q, kv).visible) first = q;
            for (int q = first; q < t.q_tiles(); ++q) {
              ASSERT_TRUE(truth(t, q, kv).visible) << "visible tiles of a chain are contiguous";
              // Set exactly when some pair of a real query row is masked or
              // its key lies past seqlen_k.
              EXPECT_EQ(t.needs_mask(q, kv), truth(t, q, kv).partial) << sq << " " << sk << " " << q << " " << kv;
            }
            if (first < t.q_tiles()) {
              EXPECT_EQ(t.q_begin(kv), first) << sq << " " << sk << " kv " << kv;
            }
          }
          for (int q = 0; q < t.q_tiles(); ++q) {
            int contributors = 0;
            for (int kv = 0; kv < t.kv_tiles(); ++kv) contributors += truth(t, q, kv).visible ? 1 : 0;
            EXPECT_EQ(t.kv_end(q), contributors);
          }
          for (int kv = 0; kv < t.kv_tiles(); ++kv) {
            EXPECT_LT(t.q_begin(kv), t.q_tiles()) << "no chain is empty";
            for (int other = 0; other < t.kv_tiles(); ++other)
              EXPECT_EQ(t.q_begin(other) == t.q_begin(kv), t.level_begin(kv) <= other && other < t.level_end(kv));
          }
        }
}

TEST(WaveSplit, BalancedWavesWithinTheCap) {
  for (int units = 0; units < 300; ++units)
    for (int cap : {1, 3, 7, 64}) {
      const WaveSplit w = WaveSplit::make(units, cap);
      int covered = 0;
      for (int wave = 0; covered < units; ++wave) {
        EXPECT_EQ(w.first_of(wave), covered);
        EXPECT_GE(w.length_of(wave), 1);
        EXPECT_LE(w.length_of(wave), cap);
        EXPECT_GE(w.length_of(wave), w.size - 1 > 0 ? 1 : 0);
        for (int u = covered; u < covered + w.length_of(wave); ++u) EXPECT_EQ(w.wave_of(u), wave);
        covered += w.length_of(wave);
      }
      EXPECT_EQ(covered, units);
    }
}

}  // namespace
}  // namespace dash_attn::schedule
