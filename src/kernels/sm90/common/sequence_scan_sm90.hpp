// Finding which sequence of a varlen batch holds work index `index`, when
// sequence s holds count_of(s) consecutive indices (the forward's query
// tiles, the backward's work items): one warp sums the counts of 32
// sequences per step (a shuffle scan) from a cursor that only moves forward,
// since each CTA's indices increase. A CTA's next index lies about `grid`
// indices ahead, so a claim mostly lands in the window the warp scanned
// last and loads nothing. Both passes use it (fwd_kernel_sm90.hpp, bwd_producer_sm90.hpp).
#pragma once

#include <cute/config.hpp>

namespace dash_attn::sm90 {

// The window of 32 sequences the warp scanned last, kept in the lanes: a
// CTA takes many indices from one window (a sequence holds tens to
// thousands), so only moving past it reloads counts. Reloading them on every
// index cost each claim a chain of dependent loads (the sequence order, then
// cu_seqlens and seqused) on the producer's path.
struct SequenceCursor {
  int window = 0;        // the window's first sequence (lane 0's)
  int window_first = 0;  // its first index; the batch's total count once window >= batch
  int prefix = -1;       // this lane's inclusive prefix of counts in the window; -1 until scanned
};

struct SequenceIndex {
  int sequence;  // == batch: the batch has no such index
  int local;     // index within the sequence's own
};

// Warp-collective (all 32 lanes, same arguments); indices never decrease
// between calls with one cursor.
template <class CountOf>
CUTE_DEVICE SequenceIndex find_sequence(int batch, const CountOf& count_of, SequenceCursor& cursor, int index) {
  constexpr unsigned kAllLanes = 0xffffffffu;
  const int lane = static_cast<int>(threadIdx.x % 32);
  while (cursor.window < batch) {
    if (cursor.prefix < 0) {  // the same in every lane
      const int s = cursor.window + lane;
      cursor.prefix = s < batch ? count_of(s) : 0;  // inclusive scan over the lanes
      CUTE_UNROLL
      for (int delta = 1; delta < 32; delta *= 2) {
        const int below = __shfl_up_sync(kAllLanes, cursor.prefix, delta);
        if (lane >= delta) cursor.prefix += below;
      }
    }
    const unsigned holds = __ballot_sync(kAllLanes, cursor.window_first + cursor.prefix > index);
    if (holds != 0) {
      const int found = __ffs(holds) - 1;  // the first sequence whose indices reach past index
      const int below = __shfl_up_sync(kAllLanes, cursor.prefix, 1);  // the lanes' exclusive prefixes
      const int first = cursor.window_first + (found == 0 ? 0 : __shfl_sync(kAllLanes, below, found));
      return SequenceIndex{cursor.window + found, index - first};
    }
    cursor.window_first += __shfl_sync(kAllLanes, cursor.prefix, 31);
    cursor.window += 32;
    cursor.prefix = -1;
  }
  return SequenceIndex{batch, 0};
}

}  // namespace dash_attn::sm90
