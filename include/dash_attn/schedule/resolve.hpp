// Which schedule a request runs. A pure function of the requested kind and
// the mask/shape, never of the device, so the bits never depend on the GPU.
#pragma once

#include "dash_attn/host_device.hpp"
#include "dash_attn/schedule/tile_problem.hpp"
#include "dash_attn/schedule/waves.hpp"
#include "dash_attn/types.hpp"

namespace dash_attn::schedule {

// Causal heads with more KV tiles than this may run descending under auto (see below).
inline constexpr int kAutoFa3MaxKvTiles = 64;

// - shift on a causal mask runs symmetric_shift (DASH's causal form of the
//   shift), symmetric_shift on a full mask runs shift (pairing equal chains
//   balances nothing);
// - auto follows what our kernel measured on the H200 (docs/results.md,
//   2026-12-01, bf16 hdim 64/128, seqlen 512-16k), until the model is
//   calibrated: full -> fa3 (within 5% of descending everywhere, ahead by 6%
//   at hdim 64 16k; shift loses 25-45%); causal -> fa3, except on heads of
//   more than 64 KV tiles whose Q tiles are shorter than the KV tiles
//   (hdim 128's 64 x 128 tiles at 16k: descending 436-474 TFLOPS against fa3's
//   400-409; with hdim 64's square 128 x 128 tiles fa3 stays ahead, 433-440
//   against 340-343). A varlen causal batch gets descending whatever its
//   lengths: choosing by length would let other sequences of the batch change
//   a sequence's bits.
DASH_HOST_DEVICE inline ScheduleKind resolve_schedule(ScheduleKind kind, const TileProblem& p) {
  switch (kind) {
    case ScheduleKind::kShift:
    case ScheduleKind::kSymmetricShift:
      return p.causal ? ScheduleKind::kSymmetricShift : ScheduleKind::kShift;
    case ScheduleKind::kAuto:
      if (!p.causal) return ScheduleKind::kFA3;
      if (p.is_varlen()) return ScheduleKind::kDescending;
      return (p.seqlen_k + p.block_n - 1) / p.block_n > kAutoFa3MaxKvTiles && p.block_m < p.block_n
                 ? ScheduleKind::kDescending
                 : ScheduleKind::kFA3;
    default:
      return kind;
  }
}

}  // namespace dash_attn::schedule
