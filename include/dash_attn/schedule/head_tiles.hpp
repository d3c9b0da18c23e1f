// Tile geometry of one (batch, head) of the backward: how many Q and KV tiles
// there are and which (Q tile, KV tile) pairs the mask leaves work in. These
// are the trip counts every schedule and the kernel's mask share. The mask
// rule itself (bottom-right causal, sequence tails) is mask::MaskGeometry's;
// HeadTiles names the questions the schedules ask of it.
//
// block_m and block_n may differ. 32-bit arithmetic throughout: a sequence
// has fewer than 2^31 rows.
#pragma once

#include "dash_attn/host_device.hpp"
#include "dash_attn/mask/mask_geometry.hpp"

namespace dash_attn::schedule {

struct HeadTiles {
  int seqlen_q = 0;
  int seqlen_k = 0;
  int block_m = 1;
  int block_n = 1;
  bool causal = false;

  DASH_HOST_DEVICE constexpr int q_tiles() const { return (seqlen_q + block_m - 1) / block_m; }
  DASH_HOST_DEVICE constexpr int kv_tiles() const { return (seqlen_k + block_n - 1) / block_n; }

  // No left bound: the schedules take every chain to run to the last Q tile
  // and every Q tile's contributors to start at KV tile 0.
  DASH_HOST_DEVICE constexpr mask::MaskGeometry mask_geometry() const {
    return mask::MaskGeometry{seqlen_q, seqlen_k, block_m, block_n, q_tiles(), kv_tiles(),
                              mask::causal_window(causal)};
  }

  // First Q tile KV tile `kv` contributes to; it visits [q_begin(kv), q_tiles()).
  // Always < q_tiles() when seqlen_q > 0: the last row sees every key.
  DASH_HOST_DEVICE constexpr int q_begin(int kv) const { return mask_geometry().q_begin(kv); }

  DASH_HOST_DEVICE constexpr int chain_length(int kv) const {
    const mask::MaskGeometry g = mask_geometry();
    return g.q_end(kv) - g.q_begin(kv);
  }

  // Number of KV tiles contributing to Q tile q. Because q_begin is
  // non-decreasing in kv, the contributors are exactly kv in [0, kv_end(q)).
  // Zero when every row of q is masked (causal with seqlen_q > seqlen_k).
  DASH_HOST_DEVICE constexpr int kv_end(int q) const { return mask_geometry().kv_end(q); }

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
    return mask_geometry().tile_needs_mask(q, kv);
  }
};

}  // namespace dash_attn::schedule
