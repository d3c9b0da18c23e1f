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

// Forward tiles: 128 query rows per consumer warpgroup pair keeps the
// wgmma M dimension full; block_n shrinks with head_dim so K and V stages fit
// in shared memory.
DASH_HOST_DEVICE constexpr TileShape forward_tile(int head_dim) {
  return head_dim <= 64 ? TileShape{128, 128} : head_dim <= 128 ? TileShape{128, 128} : TileShape{128, 64};
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
