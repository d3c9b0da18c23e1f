// Tile geometry of one (batch, head) of the backward: how many Q and KV tiles
// there are and which (Q tile, KV tile) pairs the mask leaves work in. These
// are the trip counts every schedule and the kernel's mask share.
//
// Causal masks are bottom-right aligned (FlashAttention's convention when
// seqlen_q != seqlen_k): query row r sees key c iff c <= r + seqlen_k - seqlen_q.
// block_m and block_n may differ. 32-bit arithmetic throughout: a sequence
// has fewer than 2^31 rows.
#pragma once

#include "dash_attn/host_device.hpp"

namespace dash_attn::schedule {

// Rounds toward minus infinity (C++ '/' rounds toward zero).
DASH_HOST_DEVICE constexpr int floor_div(int a, int b) { return a >= 0 ? a / b : -((-a + b - 1) / b); }

DASH_HOST_DEVICE constexpr int clamp_int(int v, int lo, int hi) { return v < lo ? lo : v > hi ? hi : v; }

struct HeadTiles {
  int seqlen_q = 0;
  int seqlen_k = 0;
  int block_m = 1;
  int block_n = 1;
  bool causal = false;

  DASH_HOST_DEVICE constexpr int q_tiles() const { return (seqlen_q + block_m - 1) / block_m; }
  DASH_HOST_DEVICE constexpr int kv_tiles() const { return (seqlen_k + block_n - 1) / block_n; }

  // First Q tile KV tile `kv` contributes to; it visits [q_begin(kv), q_tiles()).
  // Always < q_tiles() when seqlen_q > 0: the last row sees every key.
  DASH_HOST_DEVICE constexpr int q_begin(int kv) const {
    if (!causal) return 0;
    return clamp_int(floor_div(kv * block_n - (seqlen_k - seqlen_q), block_m), 0, q_tiles());
  }

  DASH_HOST_DEVICE constexpr int chain_length(int kv) const { return q_tiles() - q_begin(kv); }

  // Number of KV tiles contributing to Q tile q. Because q_begin is
  // non-decreasing in kv, the contributors are exactly kv in [0, kv_end(q)).
  // Zero when every row of q is masked (causal with seqlen_q > seqlen_k).
  DASH_HOST_DEVICE constexpr int kv_end(int q) const {
    if (!causal) return kv_tiles();
    const int last_row = (q + 1) * block_m < seqlen_q ? (q + 1) * block_m - 1 : seqlen_q - 1;
    return clamp_int(floor_div(last_row + seqlen_k - seqlen_q, block_n) + 1, 0, kv_tiles());
  }

  // KV tiles whose q_begin equals q_begin(kv): [level_begin, level_end).
  // Several KV tiles share a first Q tile when block_n < block_m or when
  // seqlen_k > seqlen_q clamps q_begin to 0; schedules break those ties by kv.
  DASH_HOST_DEVICE constexpr int level_begin(int kv) const {
    const int v = q_begin(kv);
    return v == 0 ? 0 : kv_end(v - 1);
  }
  DASH_HOST_DEVICE constexpr int level_end(int kv) const { return kv_end(q_begin(kv)); }

  // The step needs the element mask: the causal diagonal crosses the tile or
  // the KV tile runs past seqlen_k. The model prices such steps as c_masked.
  DASH_HOST_DEVICE constexpr bool needs_mask(int q, int kv) const {
    const int last_key = (kv + 1) * block_n - 1;
    if (last_key >= seqlen_k) return true;
    return causal && last_key > q * block_m + seqlen_k - seqlen_q;
  }
};

}  // namespace dash_attn::schedule
