// Tile sizes shared by the kernels, the host planner, the schedules and the
// model. One place, so the counters the host sizes are the ones the kernel uses.
#pragma once

#include "dash_attn/host_device.hpp"

namespace dash_attn {

struct TileShape {
  int block_m;  // query rows per tile
  int block_n;  // key/value rows per tile
};

// Backward tiles. dK and dV of one KV tile live in the registers of two MMA
// warpgroups for the whole chain, so block_n * head_dim bounds the register
// budget: FlashAttention-3 found 128x128 for hdim 64 and 64x128 for hdim 128
// (its causal choice; 80x128 needs all 227 KB of shared memory) on sm90.
// hdim 256 halves both to keep dK, dV (2 x 64 x 256 fp32) in 240 registers.
DASH_HOST_DEVICE constexpr TileShape backward_tile(int head_dim) {
  return head_dim <= 64 ? TileShape{128, 128} : head_dim <= 128 ? TileShape{64, 128} : TileShape{64, 64};
}

// Forward tiles: 64 query rows per consumer warpgroup keep the wgmma M
// dimension full; block_n shrinks with head_dim so K and V stages fit in
// shared memory: hdim 256 takes FA3's and FA4's 80 keys (Q + 2 x (K + V) =
// 64 + 160 KB; +2-11% over 64 keys on the H200, 2026-12-02, docs/perf_log.md;
// n80 needs CuTe's extended wgmma shapes, cmake/cutlass.cmake). hdim 128
// keeps 128: FA3's 176 on full masks measured 1.00-1.03 of it, not worth a
// second kernel per row. hdim 64 also compiles a
// tall tile of 192 rows on three consumer warpgroups: its softmax costs about
// as much as its two GEMMs, so two warpgroups' softmax run under the third
// one's GEMMs instead of one under the other's (FA4's hdim 64 tile).
inline constexpr int kForwardTallBlockM = 192;
DASH_HOST_DEVICE constexpr bool forward_has_tall_tile(int head_dim) { return head_dim <= 64; }
DASH_HOST_DEVICE constexpr TileShape forward_tile(int head_dim, bool tall) {
  return TileShape{tall && forward_has_tall_tile(head_dim) ? kForwardTallBlockM : 128, head_dim <= 128 ? 128 : 80};
}

// Which forward tile a problem runs: the tall one wherever it is compiled,
// except on banded masks (causal or a window) with fewer than
// kForwardTallMinBandedRows query rows, whose diagonal tiles waste more of a
// 192-row tile (H200, 2026-12-02, bf16 hdim 64, 16k tokens, docs/perf_log.md:
// tall faster on every full row and on causal rows from 2k, slower on causal
// 512 and 1k). A varlen batch decides on max_seqlen_q. Either tile gives a
// row the same bits: it visits its visible key tiles in the same order, and
// the key tiles a taller tile adds are fully masked for the row (exact zeros
// into O and the row sum), so the choice never changes a sequence's result.
inline constexpr int kForwardTallMinBandedRows = 2048;
DASH_HOST_DEVICE constexpr TileShape forward_tile_for(int head_dim, bool banded, long long seqlen_q) {
  return forward_tile(head_dim, !banded || seqlen_q >= kForwardTallMinBandedRows);
}

DASH_HOST_DEVICE constexpr int ceil_div(int a, int b) { return (a + b - 1) / b; }

// The backward main kernel's structure, which the cost model (model/) must
// mirror: one dQ writer warp per shared-memory dQ stage (the MMA warpgroups
// run a tile ahead of the ordered dQ reduction), and no wait for a chain's dQ
// adds before the next chain starts (the producer claims ahead; the CTA
// barrier between chains went with 9591e68).
inline constexpr int kBackwardDqStages = 2;
inline constexpr bool kBackwardDrainsBetweenChains = false;

}  // namespace dash_attn
