// Finding which sequence of a varlen batch holds work index `index`, when
// sequence s holds count_of(s) consecutive indices (the forward's query
// tiles, the backward's work items): one warp sums the counts of 32
// sequences per step (a shuffle scan) from a cursor that only moves forward,
// since each CTA's indices increase. A CTA's next index lies about `grid`
// indices ahead, so a claim costs one or two steps of a few L2 loads per
// lane. Both passes use it (fwd_kernel_sm90.hpp, bwd_producer_sm90.hpp).
#pragma once

#include <cute/config.hpp>

namespace dash_attn::sm90 {

struct SequenceCursor {
  int sequence = 0;  // first sequence that may hold the next index
  int first = 0;     // its first index; the batch's total count once sequence == batch
};

struct SequenceIndex {
  int sequence;  // == batch: the batch has no such index
  int local;     // index within the sequence's own
};

// Warp-collective (all 32 lanes, same arguments); index >= cursor.first.
template <class CountOf>
CUTE_DEVICE SequenceIndex find_sequence(int batch, const CountOf& count_of, SequenceCursor& cursor, int index) {
  constexpr unsigned kAllLanes = 0xffffffffu;
  const int lane = static_cast<int>(threadIdx.x % 32);
  while (cursor.sequence < batch) {
    const int s = cursor.sequence + lane;
    const int count = s < batch ? count_of(s) : 0;
    int prefix = count;  // inclusive scan over the lanes
    CUTE_UNROLL
    for (int delta = 1; delta < 32; delta *= 2) {
      const int below = __shfl_up_sync(kAllLanes, prefix, delta);
      if (lane >= delta) prefix += below;
    }
    const unsigned holds = __ballot_sync(kAllLanes, cursor.first + prefix > index);
    if (holds != 0) {
      const int found = __ffs(holds) - 1;  // the first sequence whose indices reach past index
      cursor.first += __shfl_sync(kAllLanes, prefix - count, found);
      cursor.sequence += found;
      return SequenceIndex{cursor.sequence, index - cursor.first};
    }
    cursor.first += __shfl_sync(kAllLanes, prefix, 31);
    cursor.sequence += 32;
  }
  cursor.sequence = batch;
  return SequenceIndex{batch, 0};
}

}  // namespace dash_attn::sm90
