// Which schedule a request runs. A pure function of the requested kind and
// the mask/shape, never of the device, so the bits never depend on the GPU.
#pragma once

#include "dash_attn/host_device.hpp"
#include "dash_attn/schedule/tile_problem.hpp"
#include "dash_attn/schedule/waves.hpp"
#include "dash_attn/types.hpp"

namespace dash_attn::schedule {

// Causal heads with at least this many KV tiles run descending under auto,
// fewer run fa3 (see below): hdim 256's 64 x 64 tiles from 64 KV tiles,
// hdim 128's 64 x 128 from 32; hdim 64's 128 x 128 always (is_wide_square_tile).
inline constexpr int kAutoDescendingMinKvTiles = 64;
inline constexpr int kAutoDescendingMinKvTilesShortQ = 32;

// hdim 64's 128 x 128 backward tile: a step of its chains is the longest
// (128 Q rows) and a head has the fewest chains per token.
DASH_HOST_DEVICE inline bool is_wide_square_tile(const TileProblem& p) {
  return p.block_m == p.block_n && p.block_m >= 128;
}

// GQA/MQA: q-heads of a KV head that one chain walks, one after the other,
// against its KV tile (Schedule::chain_heads). A chain that walks the whole
// group keeps dK/dV in registers to the end and stores them, like MHA: no
// fp32 dK/dV accumulator, no ordered dK/dV adds between chains, no
// conversion pass, and K/V are loaded once per group instead of once per
// q-head. It also makes the chains g times longer and g times fewer, so the
// walk is cut to the largest divisor of the group that leaves at least
// kMinChainHeads chains per KV tile (heads_q / chain_heads): the grid of a
// 16k-token batch then still holds >= 8 x its KV tiles in chains. A function
// of the head counts alone, never of lengths or batch size: the walk
// decides the order of the dK/dV sums, hence their bits, and a sequence's
// bits must not depend on the batch it is in (varlen packing invariance).
inline constexpr int kMinChainHeads = 8;

DASH_HOST_DEVICE inline int default_chain_heads(const TileProblem& p) {
  const int group = p.group_size();
  int heads = group;
  while (heads > 1 && (group % heads != 0 || p.heads_q / heads < kMinChainHeads)) --heads;
  return heads;
}

// - shift on a causal mask runs symmetric_shift (DASH's causal form of the
//   shift), symmetric_shift on a full mask runs shift (pairing equal chains
//   balances nothing);
// - auto follows what our kernel measured on the H200 (docs/perf_log.md,
//   2026-12-01, two dQ writers and 8 interleaved heads; bf16 hdim 64/128,
//   seqlen 512-16k): descending, which is within 3% of fa3 or ahead on every
//   full row (both add in ascending KV order there: the same bits) and on
//   long causal rows; except causal heads of few KV tiles, where fa3 is
//   ahead: with square tiles (hdim 64's 128 x 128, hdim 256's 64 x 64) under
//   64 KV tiles by 2-11% (hdim 256: 1-6% at 512-2k, while descending is
//   14-65% ahead from 64 KV tiles, 2026-12-01 b228d52); hdim 64's 128 x 128
//   tiles now always run descending: with 32 heads in its claim order
//   (claim_interleave) it is even with fa3 at 512 and 1.02-1.03x fa3 at
//   1k-4k (H200, docs/perf_log.md twenty-fifth session); with hdim 128's
//   64 x 128 tiles under 32 KV tiles: by 13% / 17% at 512 / 1k (H200,
//   483cb34, docs/perf_log.md seventeenth session), and at 2k (16 KV tiles)
//   by 4% since the row statistics moved into the accumulators (4b1790a:
//   fa3 426 / 426 TFLOPS against descending 408 / 409 in two of three
//   alternated rounds, even in the third; at 4k descending 507 against fa3
//   489-505; H200, docs/perf_log.md twenty-fourth session). A varlen causal batch gets descending whatever its
//   lengths: choosing by length would let other sequences of the batch change
//   a sequence's bits. A sliding window gets descending (never a wave
//   schedule: see supports_window), chosen on the raw window values, not on
//   whether the window cuts anything at these lengths.
// - auto with a GQA walk (default_chain_heads > 1) gets descending too: a
//   walk multiplies fa3's stagger (its chains start at different Q tiles,
//   one walk length apart), while descending's chains all start at the last
//   Q tile. H200, 687db66, GQA 64/8 hdim 64 causal 4 x 4k (128 x 128 tiles,
//   32 KV tiles): descending 452 TFLOPS, fa3 341, atomic 454.
DASH_HOST_DEVICE inline ScheduleKind resolve_schedule(ScheduleKind kind, const TileProblem& p) {
  switch (kind) {
    case ScheduleKind::kShift:
    case ScheduleKind::kSymmetricShift:
      return p.causal ? ScheduleKind::kSymmetricShift : ScheduleKind::kShift;
    case ScheduleKind::kAuto: {
      if (p.has_window()) return ScheduleKind::kDescending;
      if (!p.causal || p.is_varlen() || default_chain_heads(p) > 1) return ScheduleKind::kDescending;
      if (is_wide_square_tile(p)) return ScheduleKind::kDescending;
      const int kv_tiles = (p.seqlen_k + p.block_n - 1) / p.block_n;
      const int descending_from = p.block_m < p.block_n ? kAutoDescendingMinKvTilesShortQ : kAutoDescendingMinKvTiles;
      return kv_tiles >= descending_from ? ScheduleKind::kDescending : ScheduleKind::kFA3;
    }
    default:
      return kind;
  }
}

// shift and symmetric_shift: chains wait on later members of their wave, so a
// wave's members are claimed together and must be co-resident.
DASH_HOST_DEVICE inline bool is_wave_schedule(ScheduleKind kind) {
  return kind == ScheduleKind::kShift || kind == ScheduleKind::kSymmetricShift;
}

// The schedule's chains and ranks follow a sliding window's band. The wave
// schedules do not: their Latin squares, pairs and closed-form ranks assume
// every chain runs to the last Q tile and every dQ tile's contributors start
// at KV tile 0, so a windowed request must refuse them by name (validation)
// instead of running them. kAuto resolves to descending under a window.
DASH_HOST_DEVICE inline bool supports_window(ScheduleKind kind) { return !is_wave_schedule(kind); }

// Heads the claim order interleaves (Schedule::total_items) for a resolved
// kind. The chain schedules take 8: measured on the H200 (docs/perf_log.md,
// 2026-12-01) against 1, 2 and 4, it lifts fa3/descending by up to 25% at
// 1k-8k (their chains no longer fill a wave with one head's dQ hand-offs);
// more heads spread the claims over more Q/dO/dQ than L2 keeps (all heads:
// atomic -30% at hdim 128 2k). atomic takes 8 too: a causal wave then holds
// the longest chains of 8 heads instead of a head's long and short ones
// (+1-5% on causal rows, -1..-2% at full 16k, with ascending Q tiles). Wave
// schedules take 1: a wave's members must be claimed together.
inline constexpr int kChainClaimInterleave = 8;

// Descending on causal heads of hdim 64's 128 x 128 tiles takes 32 when a
// chain is one q-head's. Its chains all start at the last Q tile and each
// waits there for the previous chain's ordered dQ add; a causal head's last
// chains are a few steps long, so with 8 heads dealt consecutive chains of a
// head start faster than one ordered hand-off (~2-4 us, acquire poll, bulk
// add, completion, release) and queue behind each other. 32 heads spread
// them 4x apart. H200, bf16, 16k tokens, 32 heads, 3 rounds
// (docs/perf_log.md twenty-fifth session): 1k 221 -> 285 TFLOPS, 4k 386 ->
// 438, 8k 441 -> 481, 16k 459 -> 505 (atomic 283 / 441 / 492 / 490); 16 and
// 64 heads are slower. Not elsewhere: full masks lose 3-8% (hdim 64 full 8k
// 478 -> 441), hdim 128 causal is even or loses (GQA 32/8 8k 553 -> 527), fa3
// loses at every length (its ranks follow the claim order's stagger), and
// chains that walk q-heads (chain_heads > 1) keep 8: a walk already spaces a
// head's chains chain_heads times further apart, and 32 walked heads lost
// to 8 at every length (H100, GQA 64/8 hdim 64 causal, whole-group walk, 16k
// tokens, 2 rounds, docs/perf_log.md thirty-fourth session: 1k / 2k / 4k / 8k
// 1.03 / 1.07 / 1.26 / 1.04 with 8). The claim order never changes a rank,
// so it never changes a result's bits. A causal window (window_left set)
// takes it too, unmeasured: its band is causal at the diagonal, and a window
// wider than the sequence must claim as causal.
inline constexpr int kCausalWideTileClaimInterleave = 32;

// hdim 256's 64 x 64 tiles take 2 heads at a time. A 64 x 64 step moves
// twice the Q / dO / dQ bytes per FLOP of hdim 128's 64 x 128, and 8 heads'
// chains in flight keep more of them than L2 holds: ncu of the GQA 32/8
// det. backward (full, H100, docs/perf_log.md fortieth session) read 16 GB /
// 84 GB from DRAM at 8 x 2k / 2 x 8k (L2 hits 57% / 46%, ~2.2 TB/s: bound by
// HBM). One run each, 3 reps, TFLOPS with 1 / 2 / 8 heads (H100): GQA full
// 8k 397 / 287 / 191, 2k 384 / 367 / 218; GQA causal 8k 347 / 367 / 269, 2k
// 324 / 336 / 244; MHA 8 heads full 4 x 4k 324 / 364 / 270; atomic 385-416 /
// 386-406 / 173-357. Not for one q-head's causal chains under descending
// (MHA causal 4 x 4k 156 / 220 / 334): they keep 8. Walked chains on full
// masks take 1 (kNarrowTileWalkedFullClaimInterleave): a walked chain already
// holds chain_heads q-heads' Q / dO / dQ, and one head is the fastest there
// (GQA 32/8 full 8k 397 against 287, 2k 384 against 367); on causal masks,
// whose chains are half as long on average, 2 stays ahead (367 against 347).
inline constexpr int kNarrowTileClaimInterleave = 2;
inline constexpr int kNarrowTileWalkedFullClaimInterleave = 1;
DASH_HOST_DEVICE inline bool is_narrow_square_tile(const TileProblem& p) { return p.block_m == 64 && p.block_n == 64; }

// `chain_heads`: the q-heads each chain walks (Schedule::chain_heads).
DASH_HOST_DEVICE inline int claim_interleave(ScheduleKind resolved, const TileProblem& p, int chain_heads) {
  if (is_wave_schedule(resolved)) return 1;
  const bool descending_causal_heads = resolved == ScheduleKind::kDescending && p.causal && chain_heads == 1;
  if (descending_causal_heads && is_wide_square_tile(p)) return kCausalWideTileClaimInterleave;
  if (!descending_causal_heads && is_narrow_square_tile(p))
    return chain_heads > 1 && !p.causal ? kNarrowTileWalkedFullClaimInterleave : kNarrowTileClaimInterleave;
  return kChainClaimInterleave;
}

}  // namespace dash_attn::schedule
