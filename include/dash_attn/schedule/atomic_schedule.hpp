// atomic: the non-deterministic reference. Adds land in whatever order the
// hardware performs them; the visiting order is the fastest we measured for
// unordered adds: chains in ascending KV order (longest first under a causal
// mask, as FlashAttention-3's LPT scheduler), each visiting its Q tiles from
// the last one down, as descending does, with claims dealt over 8 heads
// (claim_interleave). Against ascending Q tiles and one head at a time:
// +3-8% on causal rows of 1k-8k, within 1.5% on full rows (H200,
// 2026-12-01, docs/perf_log.md).
#pragma once

#include "dash_attn/schedule/head_tiles.hpp"
#include "dash_attn/schedule/interface.hpp"

namespace dash_attn::schedule {

struct AtomicSchedule {
  DASH_HOST_DEVICE static int items_per_head(const HeadTiles& t) { return t.kv_tiles(); }
  DASH_HOST_DEVICE static int chains_in_item(const HeadTiles&, int) { return 1; }
  DASH_HOST_DEVICE static int item_chain(const HeadTiles&, int item, int) { return item; }
  // From the last Q tile of the band (q_tiles() - 1 without a left bound)
  // down (kQStride: see ChainCursor).
  static constexpr int kQStride = -1;
  DASH_HOST_DEVICE static int first_q_tile(const HeadTiles& t, int kv) { return t.q_end(kv) - 1; }
  DASH_HOST_DEVICE static int q_tile(const HeadTiles& t, int kv, int step) { return first_q_tile(t, kv) + kQStride * step; }
  DASH_HOST_DEVICE static int rank(const HeadTiles&, int, int) { return kUnordered; }
  // Nothing waits, so one resident CTA suffices.
  DASH_HOST_DEVICE static int wave_size(const HeadTiles&) { return 1; }
};

}  // namespace dash_attn::schedule
