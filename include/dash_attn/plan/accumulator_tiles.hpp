// Where the backward workspace keeps the tiles of one (sequence, head): the
// fp32 dQ accumulator tile, the row statistics and the counter of each Q
// tile, and for GQA/MQA the dK/dV accumulator tile and counters of each KV
// tile. Device-visible: the preprocess, the main kernel and the postprocess
// all index the workspace through it.
//
// Equal lengths: (batch, head)-major, q_per_head = q_tiles per (batch, head).
// Varlen: head-major, and inside a head sequence b's tiles start at tile
// rows_q(b).begin / block_m + b. Tiles of different sequences never share a
// slot when the rows ascend (cu_seqlens monotone): the next sequence starts
// at least one tile past this one's last (floor(begin / m) + ceil(len / m)
// - 1 < floor((begin + len) / m) + 1), and the last tile of a head is below
// total / block_m + batch, the slots per head. Non-monotone arrays may make
// slots collide; the kernels then stop ordering their adds (no counter
// waits), so bad input gives wrong values, never a hang (docs/hardening.md).
#pragma once

#include <cstdint>

#include "dash_attn/host_device.hpp"
#include "dash_attn/schedule/tile_problem.hpp"

namespace dash_attn::plan {

struct AccumulatorTiles {
  int q_per_head = 0;   // dQ tiles per (batch, q-head) (equal lengths) or per q-head (varlen)
  int kv_per_head = 0;  // dK/dV tiles per (batch, kv-head) or per kv-head

  // Varlen: the slots a head needs for any lengths of `batch` sequences packed in `total` rows.
  DASH_HOST_DEVICE static constexpr int varlen_slots(int total, int batch, int block) { return total / block + batch; }

  // Slot of Q tile 0 of (sequence b, q-head h); its tile q is this + q.
  DASH_HOST_DEVICE int64_t first_q_tile(const schedule::TileProblem& p, int b, int h) const {
    if (p.cu_seqlens_q == nullptr) return (static_cast<int64_t>(b) * p.heads_q + h) * q_per_head;
    return static_cast<int64_t>(h) * q_per_head + p.rows_q(b).begin / p.block_m + b;
  }
  // Slot of KV tile 0 of (sequence b, kv-head h).
  DASH_HOST_DEVICE int64_t first_kv_tile(const schedule::TileProblem& p, int b, int h) const {
    if (p.cu_seqlens_k == nullptr) return (static_cast<int64_t>(b) * p.heads_kv + h) * kv_per_head;
    return static_cast<int64_t>(h) * kv_per_head + p.rows_k(b).begin / p.block_n + b;
  }
};

}  // namespace dash_attn::plan
