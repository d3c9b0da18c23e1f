// symmetric_shift: DASH's schedule for causal masks, made precise.
//
// Pairing. KV tile p (long chain) and KV tile n_k-1-p (short chain) form
// pair p, p < ceil(n_k / 2), run back to back on one CTA: their lengths add
// up to about n_q + 1, so pairs are balanced. With an odd n_k the middle tile
// is a pair alone.
//
// Waves. Pairs form waves (waves.hpp) of R pairs. The long chains of a wave
// all visit the rectangle of Q tiles [rect_start, n_q), rect_start =
// q_begin(last long chain of the wave); R is capped so the rectangle has at
// least R tiles.
//
// Two-phase folding (the paper's construction, which it leaves unspecified):
//  1. long chain at wave position a: K = n_q - rect_start steps of cyclic
//     shift inside the rectangle, q = rect_start + (a + t) mod K, then its
//     own triangle [q_begin(p), rect_start) ascending;
//  2. short chain: descending from n_q - 1 to its diagonal.
// In the ideal timeline (one step per unit) no two chains of a wave add into
// the same tile at the same step: rectangle steps are < K, short-chain steps
// are >= the long member's length >= K, triangle tiles lie below
// rect_start, and short chains of different pairs move down in lockstep one
// tile apart.
//
// Reduction order of a dQ tile: earlier waves first; inside a wave, by
// ideal arrival step, ties (tiles whose first Q tile coincide, e.g. when
// seqlen_k > seqlen_q) by pair index. Closed forms below; tests check them
// against a brute-force sort.
//
// Liveness: members of a wave wait on each other: wave_size() CTAs
// (<= kMaxWaveSize) must be co-resident. Causal masks only: resolve_schedule
// maps symmetric_shift on a full mask to shift.
#pragma once

#include "dash_attn/schedule/head_tiles.hpp"
#include "dash_attn/schedule/waves.hpp"

namespace dash_attn::schedule {

struct SymmetricShiftSchedule {
  struct Wave {
    int first;       // first pair (= KV tile of its long chain)
    int length;      // pairs in the wave
    int rect_start;  // first Q tile of the rectangle shared by its long chains
  };

  DASH_HOST_DEVICE static int pairs(const HeadTiles& t) { return (t.kv_tiles() + 1) / 2; }
  // Pairs [0, pairs_with_short) have a short chain; an odd middle tile has none.
  DASH_HOST_DEVICE static int pairs_with_short(const HeadTiles& t) { return t.kv_tiles() / 2; }

  DASH_HOST_DEVICE static WaveSplit waves(const HeadTiles& t) {
    const int p = pairs(t);
    if (p == 0) return WaveSplit::make(0, 1);
    const int rect = t.q_tiles() - t.q_begin(p - 1);  // smallest rectangle of any wave
    return WaveSplit::make(p, rect < kMaxWaveSize ? rect : kMaxWaveSize);
  }

  DASH_HOST_DEVICE static Wave wave_of_pair(const HeadTiles& t, int pair) {
    const WaveSplit w = waves(t);
    const int wave = w.wave_of(pair);
    const int first = w.first_of(wave);
    const int length = w.length_of(wave);
    return Wave{first, length, t.q_begin(first + length - 1)};
  }

  DASH_HOST_DEVICE static int pair_of(const HeadTiles& t, int kv) {
    const int mirror = t.kv_tiles() - 1 - kv;
    return kv < mirror ? kv : mirror;
  }

  DASH_HOST_DEVICE static int items_per_head(const HeadTiles& t) { return pairs(t); }
  DASH_HOST_DEVICE static int chains_in_item(const HeadTiles& t, int item) {
    return item < pairs_with_short(t) ? 2 : 1;
  }
  DASH_HOST_DEVICE static int item_chain(const HeadTiles& t, int item, int slot) {
    return slot == 0 ? item : t.kv_tiles() - 1 - item;
  }

  static constexpr int kQStride = 0;  // no fixed stride: the wrap inside the rectangle
  DASH_HOST_DEVICE static int q_tile(const HeadTiles& t, int kv, int step) {
    const int n_q = t.q_tiles();
    const int p = pair_of(t, kv);
    if (kv != p) return n_q - 1 - step;
    const Wave w = wave_of_pair(t, p);
    const int rect = n_q - w.rect_start;
    if (step < rect) return w.rect_start + (p - w.first + step) % rect;
    return t.q_begin(p) + step - rect;
  }

  DASH_HOST_DEVICE static int rank(const HeadTiles& t, int kv, int q) {
    const int n_k = t.kv_tiles();
    const int p = pair_of(t, kv);
    const Wave w = wave_of_pair(t, p);
    const int contributors = t.kv_end(q);
    // Earlier waves: their long chains [0, first) and short chains
    // [n_k - first, n_k), each counted if it reaches q.
    const int long_before = w.first < contributors ? w.first : contributors;
    const int short_before = contributors - (n_k - w.first) > 0 ? contributors - (n_k - w.first) : 0;
    const int before = long_before + short_before;
    const int a = p - w.first;
    if (kv == p) {
      if (q >= w.rect_start) {
        const int last_start = q - w.rect_start < w.length - 1 ? q - w.rect_start : w.length - 1;
        return before + (last_start - a + w.length) % w.length;
      }
      // Triangle: the wave's long chains [first, contributors) reach q, those
      // with a later first Q tile earlier (fewer steps from it to q).
      const int same_level_first = t.level_begin(p) > w.first ? t.level_begin(p) : w.first;
      return before + (contributors - t.level_end(p)) + (p - same_level_first);
    }
    // Short chain: after the wave's w.length long-chain adds, the short
    // chains that reach q, ordered by their long member's length (shorter
    // pairs start their short chain earlier), ties by pair.
    const int lo = n_k - w.first - contributors > 0 ? n_k - w.first - contributors : 0;
    const int end = pairs_with_short(t) - w.first < w.length ? pairs_with_short(t) - w.first : w.length;
    const int later_level = t.level_end(p) - w.first > lo ? t.level_end(p) - w.first : lo;
    const int same_level = t.level_begin(p) - w.first > lo ? t.level_begin(p) - w.first : lo;
    const int earlier = (end - later_level > 0 ? end - later_level : 0) + (a - same_level > 0 ? a - same_level : 0);
    return before + w.length + earlier;
  }

  DASH_HOST_DEVICE static int wave_size(const HeadTiles& t) { return waves(t).size; }
};

}  // namespace dash_attn::schedule
