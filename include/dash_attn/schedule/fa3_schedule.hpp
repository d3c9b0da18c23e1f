// fa3: FlashAttention-3's deterministic order (PRIOR_ART.md §2).
//  - full mask: chains in ascending KV order, ascending Q tiles, and every dQ
//    tile adds its contributions in ascending KV order;
//  - causal: shortest chain first (descending KV, FA3's SPT scheduler),
//    ascending Q tiles from the diagonal, and descending-KV reduction order,
//    i.e. rank = kv_end(q) - 1 - kv with kv_end clipped to the KV tile count.
// Every wait targets a chain of the same head claimed earlier, so the
// schedule is live with any number of resident CTAs.
// Sliding windows: chains visit their band [q_begin(kv), q_end(kv)); a dQ
// tile's contributors are [kv_begin(q), kv_end(q)), ranked kv - kv_begin(q)
// (ascending; kv without a left bound) or kv_end(q) - 1 - kv (causal).
#pragma once

#include "dash_attn/schedule/head_tiles.hpp"

namespace dash_attn::schedule {

struct Fa3Schedule {
  DASH_HOST_DEVICE static int items_per_head(const HeadTiles& t) { return t.kv_tiles(); }
  DASH_HOST_DEVICE static int chains_in_item(const HeadTiles&, int) { return 1; }
  DASH_HOST_DEVICE static int item_chain(const HeadTiles& t, int item, int) {
    return t.causal ? t.kv_tiles() - 1 - item : item;
  }
  // kQStride: see ChainCursor.
  static constexpr int kQStride = 1;
  DASH_HOST_DEVICE static int first_q_tile(const HeadTiles& t, int kv) { return t.q_begin(kv); }
  DASH_HOST_DEVICE static int q_tile(const HeadTiles& t, int kv, int step) { return first_q_tile(t, kv) + kQStride * step; }
  DASH_HOST_DEVICE static int rank(const HeadTiles& t, int kv, int q) {
    return t.causal ? t.kv_end(q) - 1 - kv : kv - t.kv_begin(q);
  }
  DASH_HOST_DEVICE static int wave_size(const HeadTiles&) { return 1; }
};

}  // namespace dash_attn::schedule
