// mask::MaskGeometry against a brute-force element mask on small shapes
// (lengths around the tile sizes, unequal blocks, no mask, causal, windows):
// row ranges, tile classes, tile ranges, the tile-local form and the
// kernels' element masks (key_limit_none_or_causal, tile_local_mask_none_or_causal, hidden<false>). HeadTiles, ForwardPlan,
// the reference's key_visible and the kernels' formulas from before they
// called the geometry (copied here) must give the same answers. At lengths near 2^31 the
// geometry must match the forward plan's former 64-bit formulas.
#include <gtest/gtest.h>

#include <algorithm>
#include <climits>
#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "attention_reference.hpp"
#include "dash_attn/mask/mask_geometry.hpp"
#include "dash_attn/schedule/head_tiles.hpp"
#include "dash_attn/plan/forward_plan.hpp"

namespace dash_attn::mask {
namespace {

// FlashAttention's rule, in 64 bits, on the raw (unnormalized) window.
bool rule_visible(int64_t row, int64_t key, int64_t seqlen_q, int64_t seqlen_k, int64_t left, int64_t right) {
  const int64_t diagonal = row + seqlen_k - seqlen_q;
  return row >= 0 && row < seqlen_q && key >= 0 && key < seqlen_k && (left < 0 || key >= diagonal - left) &&
         (right < 0 || key <= diagonal + right);
}

struct Case {
  int seqlen_q, seqlen_k, block_m, block_n, left, right;
};

std::string describe(const Case& c) {
  return "seqlen_q " + std::to_string(c.seqlen_q) + " seqlen_k " + std::to_string(c.seqlen_k) + " blocks " +
         std::to_string(c.block_m) + "x" + std::to_string(c.block_n) + " window (" + std::to_string(c.left) + ", " +
         std::to_string(c.right) + ")";
}

// What every (Q tile, KV tile) holds, counted element by element: a visible
// element (real row, real key), a hidden one (real row, any key slot of the
// tile; slots past seqlen_k are hidden).
struct BruteTiles {
  int q_tiles, kv_tiles;
  std::vector<char> any_visible, any_hidden;
  bool visible(int q, int kv) const { return any_visible[q * kv_tiles + kv] != 0; }
  bool hidden(int q, int kv) const { return any_hidden[q * kv_tiles + kv] != 0; }
};

BruteTiles brute_tiles(const Case& c) {
  BruteTiles t{(c.seqlen_q + c.block_m - 1) / c.block_m, (c.seqlen_k + c.block_n - 1) / c.block_n, {}, {}};
  t.any_visible.assign(t.q_tiles * t.kv_tiles, 0);
  t.any_hidden.assign(t.q_tiles * t.kv_tiles, 0);
  for (int row = 0; row < c.seqlen_q; ++row)
    for (int key = 0; key < t.kv_tiles * c.block_n; ++key) {
      const int index = (row / c.block_m) * t.kv_tiles + key / c.block_n;
      if (rule_visible(row, key, c.seqlen_q, c.seqlen_k, c.left, c.right))
        t.any_visible[index] = 1;
      else
        t.any_hidden[index] = 1;
    }
  return t;
}

// [begin, end) of the indices where `has` holds, [0, 0) if none; fails if
// they are not contiguous.
template <class Has>
std::pair<int, int> brute_range(int count, Has has, bool& contiguous) {
  int begin = -1, end = -1;
  contiguous = true;
  for (int i = 0; i < count; ++i)
    if (has(i)) {
      if (begin < 0) begin = i;
      else if (end != i) contiguous = false;
      end = i + 1;
    }
  return begin < 0 ? std::pair{0, 0} : std::pair{begin, end};
}

// Checks one shape; returns false (after reporting) at the first difference,
// so a broken rule does not flood the log.
bool check_geometry(const Case& c) {
  const MaskGeometry g = mask_geometry(c.seqlen_q, c.seqlen_k, c.block_m, c.block_n,
                                       sliding_window(c.left, c.right, c.seqlen_q, c.seqlen_k));
  const std::string where = describe(c);
  if (g.q_tiles != (c.seqlen_q + c.block_m - 1) / c.block_m || g.kv_tiles != (c.seqlen_k + c.block_n - 1) / c.block_n) {
    ADD_FAILURE() << where << ": tile counts";
    return false;
  }

  // Rows: [col_begin, col_end) is exactly the visible keys; [0, 0) when none.
  for (int row = 0; row < c.seqlen_q; ++row) {
    bool contiguous = true;
    const auto [begin, end] = brute_range(
        c.seqlen_k, [&](int key) { return rule_visible(row, key, c.seqlen_q, c.seqlen_k, c.left, c.right); },
        contiguous);
    if (!contiguous || g.col_begin(row) != begin || g.col_end(row) != end) {
      ADD_FAILURE() << where << " row " << row << ": [" << g.col_begin(row) << ", " << g.col_end(row)
                    << ") expected [" << begin << ", " << end << ")";
      return false;
    }
    for (int key = -1; key <= c.seqlen_k; ++key)
      if (g.visible(row, key) != rule_visible(row, key, c.seqlen_q, c.seqlen_k, c.left, c.right)) {
        ADD_FAILURE() << where << " visible(" << row << ", " << key << ")";
        return false;
      }
  }

  // Tiles: class, needs_mask, has_work, and the tile-local form on every slot
  // of the tile's real rows.
  const BruteTiles t = brute_tiles(c);
  for (int q = 0; q < t.q_tiles; ++q)
    for (int kv = 0; kv < t.kv_tiles; ++kv) {
      const TileMask expected = !t.visible(q, kv) ? TileMask::kFullyMasked
                                : t.hidden(q, kv) ? TileMask::kPartlyMasked
                                                  : TileMask::kUnmasked;
      const bool in_unmasked_range = g.unmasked_kv_begin(q) <= kv && kv < g.unmasked_kv_end(q);
      if (g.classify_tile(q, kv) != expected || g.tile_needs_mask(q, kv) != t.hidden(q, kv) ||
          g.tile_has_work(q, kv) != t.visible(q, kv) || in_unmasked_range == g.tile_needs_mask(q, kv)) {
        ADD_FAILURE() << where << " tile (" << q << ", " << kv << "): class " << static_cast<int>(g.classify_tile(q, kv))
                      << " expected " << static_cast<int>(expected);
        return false;
      }
      const TileLocalMask local = g.tile_local_mask(q, kv);
      // On a tile with work the one-compare band form equals the rule's on
      // every slot, the rows past seqlen_q included (the kernel masks them too).
      for (int row = 0; t.visible(q, kv) && row < c.block_m; ++row)
        for (int key = 0; key < c.block_n; ++key)
          if (local.hidden_in_band(key, row) != local.hidden<true>(key, row)) {
            ADD_FAILURE() << where << " tile (" << q << ", " << kv << ") band form (key " << key << ", row " << row << ")";
            return false;
          }
      for (int row = 0; row < c.block_m && q * c.block_m + row < c.seqlen_q; ++row)
        for (int key = 0; key < c.block_n; ++key) {
          const bool expected =
              rule_visible(q * c.block_m + row, kv * c.block_n + key, c.seqlen_q, c.seqlen_k, c.left, c.right);
          // Without a left bound the kernels' two-compare form is the whole rule.
          if (local.visible(key, row) != expected || (!g.has_left_bound() && local.hidden<false>(key, row) == expected)) {
            ADD_FAILURE() << where << " tile (" << q << ", " << kv << ") local (key " << key << ", row " << row << ")";
            return false;
          }
        }
    }

  // The forward kernel's per-row limit: exactly the keys the right edge and
  // the seqlen_k tail leave, over the key slots of every KV tile.
  for (int row = 0; row < c.seqlen_q; ++row)
    for (int key = 0; key < t.kv_tiles * c.block_n; ++key)
      if ((key < g.key_limit(row)) != (key < c.seqlen_k && rule_visible(row, key, c.seqlen_q, c.seqlen_k, -1, c.right))) {
        ADD_FAILURE() << where << " row " << row << " key " << key << ": key_limit " << g.key_limit(row);
        return false;
      }

  // Ranges: the tiles with work are contiguous and are exactly the range.
  for (int q = 0; q < t.q_tiles; ++q) {
    bool contiguous = true;
    const auto [begin, end] = brute_range(t.kv_tiles, [&](int kv) { return t.visible(q, kv); }, contiguous);
    if (!contiguous || g.kv_begin(q) != begin || g.kv_end(q) != end) {
      ADD_FAILURE() << where << " Q tile " << q << ": KV [" << g.kv_begin(q) << ", " << g.kv_end(q) << ") expected ["
                    << begin << ", " << end << ")";
      return false;
    }
  }
  for (int kv = 0; kv < t.kv_tiles; ++kv) {
    bool contiguous = true;
    const auto [begin, end] = brute_range(t.q_tiles, [&](int q) { return t.visible(q, kv); }, contiguous);
    if (!contiguous || g.q_begin(kv) != begin || g.q_end(kv) != end) {
      ADD_FAILURE() << where << " KV tile " << kv << ": Q [" << g.q_begin(kv) << ", " << g.q_end(kv) << ") expected ["
                    << begin << ", " << end << ")";
      return false;
    }
  }
  return true;
}

// The schedules' and the forward plan's names for the same questions, for the
// masks the kernels run today (no mask, causal).
bool check_plans(const Case& c, bool causal) {
  const std::string where = describe(c);
  const BruteTiles t = brute_tiles(c);
  const schedule::HeadTiles tiles{c.seqlen_q, c.seqlen_k, c.block_m, c.block_n, causal};
  schedule::ForwardPlan plan;
  plan.tile = TileShape{c.block_m, c.block_n};
  plan.seqlen_q = c.seqlen_q;
  plan.seqlen_k = c.seqlen_k;
  plan.causal = causal;
  plan.m_blocks = t.q_tiles;
  plan.n_blocks = t.kv_tiles;
  if (tiles.q_tiles() != t.q_tiles || tiles.kv_tiles() != t.kv_tiles) {
    ADD_FAILURE() << where << ": HeadTiles tile counts";
    return false;
  }
  std::vector<int> first_q(t.kv_tiles);
  for (int kv = 0; kv < t.kv_tiles; ++kv) {
    bool contiguous = true;
    const auto [begin, end] = brute_range(t.q_tiles, [&](int q) { return t.visible(q, kv); }, contiguous);
    first_q[kv] = begin;
    if (end != t.q_tiles || tiles.q_begin(kv) != begin || tiles.chain_length(kv) != end - begin) {
      ADD_FAILURE() << where << " KV tile " << kv << ": HeadTiles q_begin " << tiles.q_begin(kv) << " chain "
                    << tiles.chain_length(kv) << ", expected [" << begin << ", " << end << ")";
      return false;
    }
  }
  for (int kv = 0; kv < t.kv_tiles; ++kv)
    for (int other = 0; other < t.kv_tiles; ++other)
      if ((first_q[other] == first_q[kv]) != (tiles.level_begin(kv) <= other && other < tiles.level_end(kv))) {
        ADD_FAILURE() << where << " KV tile " << kv << ": level [" << tiles.level_begin(kv) << ", "
                      << tiles.level_end(kv) << ") vs KV tile " << other;
        return false;
      }
  for (int q = 0; q < t.q_tiles; ++q) {
    bool contiguous = true;
    const auto [begin, end] = brute_range(t.kv_tiles, [&](int kv) { return t.visible(q, kv); }, contiguous);
    if (begin != 0 || tiles.kv_end(q) != end || plan.n_block_end(q) != end) {
      ADD_FAILURE() << where << " Q tile " << q << ": kv_end " << tiles.kv_end(q) << " n_block_end "
                    << plan.n_block_end(q) << " expected [" << begin << ", " << end << ")";
      return false;
    }
    for (int kv = 0; kv < t.kv_tiles; ++kv)
      if (tiles.needs_mask(q, kv) != t.hidden(q, kv) || plan.needs_mask(q, kv) != t.hidden(q, kv)) {
        ADD_FAILURE() << where << " tile (" << q << ", " << kv << "): needs_mask " << tiles.needs_mask(q, kv) << " / "
                      << plan.needs_mask(q, kv) << " expected " << t.hidden(q, kv);
        return false;
      }
  }

  // The reference's predicate, and the kernels' element masks as they were
  // written before they called key_limit and tile_local_mask (fwd_softmax_sm90.hpp
  // apply_mask, bwd_mainloop_sm90.hpp after needs_mask): the same values, so the
  // same code (the SASS did not change).
  const MaskGeometry g = tiles.mask_geometry();
  for (int row = 0; row < t.q_tiles * c.block_m; ++row) {  // padding rows included
    const int diagonal_limit = row + 1 + c.seqlen_k - c.seqlen_q;
    const int limit = causal && diagonal_limit < c.seqlen_k ? diagonal_limit : c.seqlen_k;
    if (g.col_begin(row) != 0 || g.key_limit(row) != limit || g.key_limit_none_or_causal(row) != limit ||
        g.col_end(row) != (limit > 0 ? limit : 0)) {
      ADD_FAILURE() << where << " row " << row << ": forward kernel limit " << limit << ", col_end " << g.col_end(row);
      return false;
    }
    if (row < c.seqlen_q)
      for (int key = 0; key < c.seqlen_k; ++key)
        if (reference::key_visible(row, key, c.seqlen_q, c.seqlen_k, causal) !=
            rule_visible(row, key, c.seqlen_q, c.seqlen_k, c.left, c.right)) {
          ADD_FAILURE() << where << " reference key_visible(" << row << ", " << key << ")";
          return false;
        }
  }
  for (int q = 0; q < t.q_tiles; ++q)
    for (int kv = 0; kv < t.kv_tiles; ++kv) {
      const int key_base = kv * c.block_n;
      const int keys_left = c.seqlen_k - key_base;
      const int diagonal = causal ? c.seqlen_k - c.seqlen_q + q * c.block_m - key_base : c.block_n;
      const TileLocalMask local = g.tile_local_mask_none_or_causal(q, kv);
      const TileLocalMask general = g.tile_local_mask(q, kv);
      if (local.keys_left != keys_left || local.max_key_minus_row != diagonal || general.keys_left != keys_left ||
          general.max_key_minus_row != diagonal) {
        ADD_FAILURE() << where << " tile (" << q << ", " << kv << "): backward kernel (" << keys_left << ", "
                      << diagonal << "), geometry (" << local.keys_left << ", " << local.max_key_minus_row << ")";
        return false;
      }
      for (int row = 0; row < c.block_m; ++row)  // padding rows included
        for (int key = 0; key < c.block_n; ++key)
          if (local.hidden<false>(key, row) != (key >= keys_left || key - row > diagonal)) {
            ADD_FAILURE() << where << " tile (" << q << ", " << kv << ") local (key " << key << ", row " << row << ")";
            return false;
          }
    }
  return true;
}

constexpr int kLengths[] = {1, 2, 3, 15, 16, 17, 31, 32, 33, 47, 63, 64, 65, 70};
// 24: a tile size that is no power of two (the forward's 192 rows and 80 keys).
constexpr int kBlocks[] = {16, 24, 32, 64};

TEST(MaskGeometry, MatchesTheElementMaskForWindowsAndTails) {
  // No mask, causal, and windows: the diagonal alone, one-sided, asymmetric,
  // wider than the sequence, and too large for r + offset + bound in 32 bits.
  const int windows[][2] = {{-1, -1}, {-1, 0}, {0, 0},   {0, -1},    {1, 1},    {3, 0},        {-1, 2},    {5, -1},
                            {2, 17},  {17, 2}, {0, 100}, {100, 0},   {100, 100}, {1 << 30, 1 << 30}, {INT_MAX, 0},
                            {0, INT_MAX}};
  for (int seqlen_q : kLengths)
    for (int seqlen_k : kLengths)
      for (int block_m : kBlocks)
        for (int block_n : kBlocks)
          for (const auto& w : windows)
            ASSERT_TRUE(check_geometry(Case{seqlen_q, seqlen_k, block_m, block_n, w[0], w[1]}));
}

TEST(MaskGeometry, CausalIsTheWindowMinusOneZero) {
  for (int seqlen_q : kLengths)
    for (int seqlen_k : kLengths) {
      const MaskWindow a = causal_window(true), b = sliding_window(-1, 0, seqlen_q, seqlen_k);
      EXPECT_EQ(a.left, b.left);
      EXPECT_EQ(a.right, b.right);
      const MaskWindow none = sliding_window(-1, -1, seqlen_q, seqlen_k);
      EXPECT_EQ(causal_window(false).left, none.left);
      EXPECT_EQ(causal_window(false).right, none.right);
    }
}

TEST(MaskGeometry, HeadTilesForwardPlanReferenceAndKernelsAgree) {
  for (int seqlen_q : kLengths)
    for (int seqlen_k : kLengths)
      for (int block_m : kBlocks)
        for (int block_n : kBlocks)
          for (bool causal : {false, true})
            ASSERT_TRUE(check_plans(Case{seqlen_q, seqlen_k, block_m, block_n, -1, causal ? 0 : -1}, causal));
}

// The forward plan used 64-bit arithmetic; the geometry's 32-bit one must give
// the same answers up to the longest sequences validation lets through.
TEST(MaskGeometry, LongSequencesMatchTheFormer64BitForwardFormulas) {
  const int64_t longest = INT_MAX - 64;
  const int64_t lengths[] = {longest, longest - 1, longest - 130, int64_t{1} << 30, 1000};
  for (const TileShape tile : {TileShape{128, 128}, TileShape{128, 80}, TileShape{192, 128}, TileShape{64, 128}})
    for (int64_t seqlen_q : lengths)
      for (int64_t seqlen_k : lengths)
        for (bool causal : {false, true}) {
          const int64_t m_blocks = (seqlen_q + tile.block_m - 1) / tile.block_m;
          const int64_t n_blocks = (seqlen_k + tile.block_n - 1) / tile.block_n;
          const MaskGeometry g{static_cast<int>(seqlen_q), static_cast<int>(seqlen_k), tile.block_m, tile.block_n,
                               static_cast<int>(m_blocks), static_cast<int>(n_blocks), causal_window(causal)};
          auto old_n_block_end = [&](int64_t m) {
            if (!causal) return n_blocks;
            const int64_t visible_keys = std::min((m + 1) * tile.block_m, seqlen_q) + seqlen_k - seqlen_q;
            if (visible_keys <= 0) return int64_t{0};
            return std::min((visible_keys + tile.block_n - 1) / tile.block_n, n_blocks);
          };
          auto old_needs_mask = [&](int64_t m, int64_t n) {
            const int64_t keys_end = (n + 1) * tile.block_n;
            return keys_end > seqlen_k || (causal && keys_end > m * tile.block_m + seqlen_k - seqlen_q + 1);
          };
          // Tiles at both ends and around the diagonal of the first, middle and last Q tile.
          std::vector<int64_t> qs = {0, 1, m_blocks / 2, m_blocks - 2, m_blocks - 1};
          for (int64_t q : qs) {
            if (q < 0 || q >= m_blocks) continue;
            ASSERT_EQ(g.kv_end(static_cast<int>(q)), old_n_block_end(q)) << seqlen_q << " " << seqlen_k << " " << q;
            const int64_t end = old_n_block_end(q);
            for (int64_t kv : {int64_t{0}, end - 2, end - 1, end, n_blocks - 1})
              if (kv >= 0 && kv < n_blocks)
                ASSERT_EQ(g.tile_needs_mask(static_cast<int>(q), static_cast<int>(kv)), old_needs_mask(q, kv))
                    << seqlen_q << " " << seqlen_k << " tile (" << q << ", " << kv << ")";
          }
        }
}

}  // namespace
}  // namespace dash_attn::mask
