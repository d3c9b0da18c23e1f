// Finding a varlen batch's query tile from its index (the order is
// schedule::VarlenForwardTiles'): one warp sums the tile counts of 32
// sequences per step (a shuffle scan) from a cursor that only moves forward,
// since each CTA's tile indices increase. A CTA's next index lies about
// `grid` tiles ahead, so a claim costs one or two steps of two L2 loads per
// lane, and the producer warp takes it while the consumers still multiply.
#pragma once

#include <cute/config.hpp>

#include "dash_attn/schedule/varlen_forward_tiles.hpp"

namespace dash_attn::sm90::fwd {

struct VarlenTileCursor {
  int sequence = 0;    // first sequence that may hold the next index
  int first_tile = 0;  // its first tile index; the batch's tile count once sequence == batch
};

// Warp-collective (all 32 lanes, same arguments): the work of tile `index`
// (>= cursor.first_tile), or end_of_work() when the batch has fewer tiles.
CUTE_DEVICE schedule::VarlenForwardWork find_varlen_tile(const schedule::VarlenForwardTiles& tiles,
                                                         VarlenTileCursor& cursor, int index) {
  constexpr unsigned kAllLanes = 0xffffffffu;
  const int lane = static_cast<int>(threadIdx.x % 32);
  while (cursor.sequence < tiles.batch) {
    const int s = cursor.sequence + lane;
    const int count = s < tiles.batch ? tiles.tiles_of(s) : 0;
    int prefix = count;  // inclusive scan over the lanes
    CUTE_UNROLL
    for (int delta = 1; delta < 32; delta *= 2) {
      const int below = __shfl_up_sync(kAllLanes, prefix, delta);
      if (lane >= delta) prefix += below;
    }
    const unsigned holds = __ballot_sync(kAllLanes, cursor.first_tile + prefix > index);
    if (holds != 0) {
      const int found = __ffs(holds) - 1;  // the first sequence whose tiles reach past index
      cursor.first_tile += __shfl_sync(kAllLanes, prefix - count, found);
      cursor.sequence += found;
      return tiles.work(cursor.sequence, index - cursor.first_tile);
    }
    cursor.first_tile += __shfl_sync(kAllLanes, prefix, 31);
    cursor.sequence += 32;
  }
  cursor.sequence = tiles.batch;
  return tiles.end_of_work();
}

}  // namespace dash_attn::sm90::fwd
