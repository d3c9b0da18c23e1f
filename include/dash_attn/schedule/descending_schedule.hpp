// descending: DASH's descending Q-tile iteration. Chains in ascending KV
// order (longest first under a causal mask), each visiting its Q tiles from
// the last one down to its first, and every dQ tile adds in ascending KV
// order. All chains reach the last Q tile first, so under a causal mask no
// chain's first add waits for a whole earlier chain (FA3's stall); the adds
// into a tile are staggered by one reduction instead.
// Every wait targets a lower KV tile of the same head, claimed earlier: live
// with any number of resident CTAs.
// Sliding windows: a chain runs from the last Q tile of its band, q_end(kv) - 1
// (the last Q tile without a left bound), down to q_begin(kv); a dQ tile's
// contributors are [kv_begin(q), kv_end(q)), ranked kv - kv_begin(q) (kv
// without a left bound). Waits still target lower KV tiles: live as above.
#pragma once

#include "dash_attn/schedule/head_tiles.hpp"

namespace dash_attn::schedule {

struct DescendingSchedule {
  DASH_HOST_DEVICE static int items_per_head(const HeadTiles& t) { return t.kv_tiles(); }
  DASH_HOST_DEVICE static int chains_in_item(const HeadTiles&, int) { return 1; }
  DASH_HOST_DEVICE static int item_chain(const HeadTiles&, int item, int) { return item; }
  // kQStride: see ChainCursor.
  static constexpr int kQStride = -1;
  DASH_HOST_DEVICE static int first_q_tile(const HeadTiles& t, int kv) { return t.q_end(kv) - 1; }
  DASH_HOST_DEVICE static int q_tile(const HeadTiles& t, int kv, int step) { return first_q_tile(t, kv) + kQStride * step; }
  DASH_HOST_DEVICE static int rank(const HeadTiles& t, int kv, int q) { return kv - t.kv_begin(q); }
  DASH_HOST_DEVICE static int wave_size(const HeadTiles&) { return 1; }
};

}  // namespace dash_attn::schedule
