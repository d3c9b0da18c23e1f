// Which schedule a request runs. A pure function of the requested kind and
// the mask/shape, never of the device, so the bits never depend on the GPU.
#pragma once

#include "dash_attn/host_device.hpp"
#include "dash_attn/schedule/tile_problem.hpp"
#include "dash_attn/schedule/waves.hpp"
#include "dash_attn/types.hpp"

namespace dash_attn::schedule {

// - shift on a causal mask runs symmetric_shift (DASH's causal form of the
//   shift), symmetric_shift on a full mask runs shift (pairing equal chains
//   balances nothing);
// - auto: causal -> descending (the fastest deterministic order measured at
//   hdim 128 causal, 1.28x over FA3's, PRIOR_ART.md §3, and live with any
//   number of resident CTAs); full -> shift when a head's KV tiles fit one
//   wave (conflict-free adds; +4-22% measured up to 8k), fa3 beyond (shift
//   lost to the baseline at 16k, where cross-L2 handoffs dominate). A varlen
//   full-mask batch gets shift whatever its lengths: choosing by length would
//   let other sequences of the batch change a sequence's bits.
DASH_HOST_DEVICE inline ScheduleKind resolve_schedule(ScheduleKind kind, const TileProblem& p) {
  switch (kind) {
    case ScheduleKind::kShift:
    case ScheduleKind::kSymmetricShift:
      return p.causal ? ScheduleKind::kSymmetricShift : ScheduleKind::kShift;
    case ScheduleKind::kAuto:
      if (p.causal) return ScheduleKind::kDescending;
      if (p.is_varlen()) return ScheduleKind::kShift;
      return (p.seqlen_k + p.block_n - 1) / p.block_n <= kMaxWaveSize ? ScheduleKind::kShift : ScheduleKind::kFA3;
    default:
      return kind;
  }
}

}  // namespace dash_attn::schedule
