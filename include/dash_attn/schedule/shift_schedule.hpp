// shift: DASH's cyclic shift for full masks. The KV tiles of a head form
// waves (waves.hpp) of R <= min(kMaxWaveSize, q_tiles) chains; the chain at
// position a of its wave visits Q tile (a * d + t) mod q_tiles at step t, with
// the stride d = q_tiles / R (integer division, >= 1). At every step the
// chains of a wave add into R distinct dQ tiles (a * d < q_tiles), and
// consecutive visitors of a tile are d steps apart.
//
// Why the stride: an ordered add's hand-off (release, observe, acquire, add)
// takes longer than one step on the H200 (docs/perf_log.md, 2026-12-01), so
// with d = 1 every member waits on its neighbour every step. Where there are
// at least twice as many Q tiles as members (hdim 128's 64-row Q tiles under
// 128-key KV tiles) the stride gives each hand-off d steps of slack.
//
// Reduction order of a dQ tile: earlier waves first; inside a wave, arrival
// order in the ideal timeline. Chain a reaches tile q at step (q - a d) mod
// q_tiles: members a <= last = min(R-1, q / d) arrive without wrapping, in
// decreasing a, then the wrapped ones, also in decreasing a, all later; so
// rank = first + (last - a) mod R. Each contribution waits on one that
// arrived d steps earlier in the ideal timeline, never on a later step.
//
// Generalizations: R is capped by q_tiles so arrival steps never tie (with
// fewer Q tiles than a full wave, waves shrink instead of colliding); the
// last wave of a head may be smaller (its own stride). Full masks only:
// resolve_schedule maps shift on a causal problem to symmetric_shift.
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

  DASH_HOST_DEVICE static int q_tile(const HeadTiles& t, int kv, int step) {
    const WaveSplit w = waves(t);
    const int wave = w.wave_of(kv);
    const int a = kv - w.first_of(wave);
    return (a * stride(t, w.length_of(wave)) + step) % t.q_tiles();
  }
  DASH_HOST_DEVICE static int rank(const HeadTiles& t, int kv, int q) {
    const WaveSplit w = waves(t);
    const int wave = w.wave_of(kv);
    const int first = w.first_of(wave);
    const int length = w.length_of(wave);
    const int by_stride = q / stride(t, length);
    const int last = by_stride < length - 1 ? by_stride : length - 1;
    return first + (last - (kv - first) + length) % length;
  }
  // Steps between consecutive visitors of a dQ tile inside a wave of `length` members.
  DASH_HOST_DEVICE static int stride(const HeadTiles& t, int length) { return t.q_tiles() / length; }
  DASH_HOST_DEVICE static int wave_size(const HeadTiles& t) { return waves(t).size; }
};

}  // namespace dash_attn::schedule
