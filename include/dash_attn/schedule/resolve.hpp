// Which schedule a request runs. A pure function of the requested kind and
// the mask/shape, never of the device, so the bits never depend on the GPU.
#pragma once

#include "dash_attn/host_device.hpp"
#include "dash_attn/schedule/tile_problem.hpp"
#include "dash_attn/schedule/waves.hpp"
#include "dash_attn/types.hpp"

namespace dash_attn::schedule {

// Causal heads with at most this many KV tiles run fa3 under auto (see below).
inline constexpr int kAutoFa3MaxKvTiles = 64;

// - shift on a causal mask runs symmetric_shift (DASH's causal form of the
//   shift), symmetric_shift on a full mask runs shift (pairing equal chains
//   balances nothing);
// - auto follows what our kernel measured on the H200 (docs/results.md,
//   2026-11-29, bf16 hdim 64/128, seqlen 512-16k), until the model is
//   calibrated: full -> fa3 (fastest deterministic order, or within 1% of
//   descending, at every length; shift lost 5-40%); causal -> fa3 up to 64 KV
//   tiles per head (8k at kBlockN 128: fa3 ahead by up to 20% at 1k-8k, tied
//   at hdim 128 8k), descending beyond (16k: 3-7% ahead). A varlen causal
//   batch gets descending whatever its lengths: choosing by length would let
//   other sequences of the batch change a sequence's bits.
DASH_HOST_DEVICE inline ScheduleKind resolve_schedule(ScheduleKind kind, const TileProblem& p) {
  switch (kind) {
    case ScheduleKind::kShift:
    case ScheduleKind::kSymmetricShift:
      return p.causal ? ScheduleKind::kSymmetricShift : ScheduleKind::kShift;
    case ScheduleKind::kAuto:
      if (!p.causal) return ScheduleKind::kFA3;
      if (p.is_varlen()) return ScheduleKind::kDescending;
      return (p.seqlen_k + p.block_n - 1) / p.block_n <= kAutoFa3MaxKvTiles ? ScheduleKind::kFA3
                                                                              : ScheduleKind::kDescending;
    default:
      return kind;
  }
}

}  // namespace dash_attn::schedule
