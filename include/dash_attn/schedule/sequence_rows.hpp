// The rows of one sequence of a packed variable-length batch, read from the
// device arrays (cu_seqlens, optional seqused) and clamped so that whatever
// the arrays hold, a kernel never addresses a row outside the packed tensor:
// begin in [0, total], begin + length <= total, length <= bound. A
// non-monotone array or one past the tensor gives empty or shortened
// sequences (wrong rows for bad input, never a bad access). Shared by the
// forward's tile order and the backward's TileProblem.
#pragma once

#include <cstdint>

#include "dash_attn/host_device.hpp"
#include "dash_attn/mask/mask_geometry.hpp"

namespace dash_attn::schedule {

// No bound: what the model's host arrays, which it builds itself, need.
inline constexpr int kNoRowBound = 0x7fffffff;

struct SequenceRows {
  int begin = 0;
  int length = 0;
};

// Sequence s of the batch whose prefix sums are cu_seqlens (and used lengths
// seqused, or null); length is also cut to `bound` (the backward's
// max_seqlen, which sizes its per-tile grids).
DASH_HOST_DEVICE inline SequenceRows sequence_rows(const int32_t* cu_seqlens, const int32_t* seqused, int total, int s,
                                                   int bound = kNoRowBound) {
  const int begin = mask::clamp_int(cu_seqlens[s], 0, total);
  const int end = mask::clamp_int(cu_seqlens[s + 1], begin, total);
  int length = end - begin;
  if (seqused != nullptr) length = mask::clamp_int(seqused[s], 0, length);
  return SequenceRows{begin, length < bound ? length : bound};
}

}  // namespace dash_attn::schedule
