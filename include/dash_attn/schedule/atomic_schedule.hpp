// atomic: the non-deterministic reference. Chains in ascending KV order
// (longest first under a causal mask, as FlashAttention-3's LPT scheduler),
// ascending Q tiles, and no reduction order: adds land in whatever order the
// hardware performs them.
#pragma once

#include "dash_attn/schedule/head_tiles.hpp"
#include "dash_attn/schedule/interface.hpp"

namespace dash_attn::schedule {

struct AtomicSchedule {
  DASH_HOST_DEVICE static int items_per_head(const HeadTiles& t) { return t.kv_tiles(); }
  DASH_HOST_DEVICE static int chains_in_item(const HeadTiles&, int) { return 1; }
  DASH_HOST_DEVICE static int item_chain(const HeadTiles&, int item, int) { return item; }
  DASH_HOST_DEVICE static int q_tile(const HeadTiles& t, int kv, int step) { return t.q_begin(kv) + step; }
  DASH_HOST_DEVICE static int rank(const HeadTiles&, int, int) { return kUnordered; }
  // Nothing waits, so one resident CTA suffices.
  DASH_HOST_DEVICE static int wave_size(const HeadTiles&) { return 1; }
};

}  // namespace dash_attn::schedule
