// Layout of one fp32 dQ accumulator tile, shared by the main kernel (which
// writes it to shared memory and bulk-adds it flat into global memory) and the
// postprocess (which reads it back).
#pragma once

namespace dash_attn::sm90::bwd {

// Rows of head_dim floats; column blocks of 8 XOR-swizzled by the row, so the
// MMA warpgroups' fragment stores to shared memory avoid bank conflicts.
__host__ __device__ constexpr int dq_offset(int row, int col, int head_dim) {
  return row * head_dim + (col ^ ((row & 7) << 3));
}

}  // namespace dash_attn::sm90::bwd
