// Layout of one fp32 dQ accumulator tile, shared by the main kernel (which
// writes it to shared memory and bulk-adds it flat into global memory) and the
// postprocess (which reads it back).
//
// Fragment order: the tile holds the dQ GEMM's accumulator registers as the
// MMA threads own them, float4 r of every thread before float4 r + 1 of any:
// element (thread t, register i) lies at float ((i / 4) * 256 + t) * 4 + i % 4.
// Each thread then stores its registers with 16-byte stores to one address
// plus constants, conflict-free, where a row-major tile needed an address per
// pair of columns: ncu on the H200 (hdim 64 full 4 x 4k) counted 16 8-byte
// stores and ~50 integer instructions per step for them, and ptxas kept
// those addresses in registers the step's accumulators needed. The bulk add
// is flat, so global memory keeps the same order; only the postprocess maps
// (row, col) back, here.
#pragma once

#include "dash_attn/host_device.hpp"

namespace dash_attn::sm90::bwd {

// Threads of the dQ GEMM: two MMA warpgroups (bwd_traits_sm90.hpp's kMmaThreads).
inline constexpr int kDqTileThreads = 256;

// Float offset of element (row, col) of a block_m x head_dim dQ tile. The
// two warpgroups split the rows when block_m is 128 (bwd_traits_sm90.hpp's
// kDqAtomM = 2), else the columns; within a warpgroup's 64 x n block, wgmma's
// accumulator layout: thread 32 * (m / 16) + 4 * (m % 8) + (c % 8) / 2 holds
// register (c % 2) + 2 * ((m / 8) % 2) + 4 * (c / 8).
DASH_HOST_DEVICE constexpr int dq_offset(int row, int col, int block_m, int head_dim) {
  const int row_groups = block_m == 128 ? 2 : 1;
  const int n = head_dim * row_groups / 2;  // columns of one warpgroup's block
  const int warpgroup = row / 64 + row_groups * (col / n);
  const int m = row % 64, c = col % n;
  const int thread = 128 * warpgroup + 32 * (m / 16) + 4 * (m % 8) + (c % 8) / 2;
  const int reg = c % 2 + 2 * ((m / 8) % 2) + 4 * (c / 8);
  return ((reg / 4) * kDqTileThreads + thread) * 4 + reg % 4;
}

}  // namespace dash_attn::sm90::bwd
