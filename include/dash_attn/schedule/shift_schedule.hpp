// shift: DASH's cyclic shift for full masks. The KV tiles of a head form
// waves (waves.hpp) of R <= min(kMaxWaveSize, q_tiles) chains; the chain at
// position a of its wave visits Q tile (a + t) mod q_tiles at step t, so at
// every step the chains of a wave add into R distinct dQ tiles (a Latin
// square) and, with equal step times, nobody waits.
//
// Reduction order of a dQ tile: earlier waves first; inside a wave, arrival
// order in the ideal timeline: the chain at step 0 on the tile first, then
// the one at step 1, ... Chain a reaches tile q at step (q - a) mod q_tiles,
// which gives rank = first + (min(q, R-1) - a) mod R.
//
// Generalizations: R is capped by q_tiles so arrival steps never tie (with
// fewer Q tiles than a full wave, waves shrink instead of colliding); the
// last wave of a head may be smaller. Full masks only: resolve_schedule maps
// shift on a causal problem to symmetric_shift.
//
// Liveness: a chain waits on later members of its own wave, so every wave
// must be co-resident: wave_size() CTAs (<= kMaxWaveSize) resident at once.
#pragma once

#include "dash_attn/schedule/head_tiles.hpp"
#include "dash_attn/schedule/waves.hpp"

namespace dash_attn::schedule {

struct ShiftSchedule {
  DASH_HOST_DEVICE static WaveSplit waves(const HeadTiles& t) {
    const int cap = t.q_tiles() < kMaxWaveSize ? t.q_tiles() : kMaxWaveSize;
    return WaveSplit::make(t.kv_tiles(), cap);
  }

  DASH_HOST_DEVICE static int items_per_head(const HeadTiles& t) { return t.kv_tiles(); }
  DASH_HOST_DEVICE static int chains_in_item(const HeadTiles&, int) { return 1; }
  DASH_HOST_DEVICE static int item_chain(const HeadTiles&, int item, int) { return item; }

  static constexpr int kQStride = 0;  // no fixed stride: the wrap at q_tiles
  DASH_HOST_DEVICE static int q_tile(const HeadTiles& t, int kv, int step) {
    const WaveSplit w = waves(t);
    const int a = kv - w.first_of(w.wave_of(kv));
    return (a + step) % t.q_tiles();
  }

  DASH_HOST_DEVICE static int rank(const HeadTiles& t, int kv, int q) {
    const WaveSplit w = waves(t);
    const int wave = w.wave_of(kv);
    const int first = w.first_of(wave);
    const int length = w.length_of(wave);
    const int last_start = q < length - 1 ? q : length - 1;
    return first + (last_start - (kv - first) + length) % length;
  }

  DASH_HOST_DEVICE static int wave_size(const HeadTiles& t) { return waves(t).size; }
};

}  // namespace dash_attn::schedule
