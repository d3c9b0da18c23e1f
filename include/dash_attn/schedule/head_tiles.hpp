// Tile geometry of one (batch, head) of the backward: how many Q and KV tiles
// there are and which (Q tile, KV tile) pairs the mask leaves work in. These
// are the trip counts every schedule and the kernel's mask share. The mask
// rule itself (bottom-right causal, sliding windows, sequence tails) is
// mask::MaskGeometry's; HeadTiles names the questions the schedules ask of it.
// Tiles outside the band of a window are skipped, not masked: every chain and
// every dQ tile's contributor range comes from the band.
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
  // FlashAttention's window_size = (left, right), -1 unbounded, bottom-right
  // aligned; causal together with a window means (window_left, 0). Last, so
  // that HeadTiles{sq, sk, bm, bn, causal} keeps meaning "no window".
  int window_left = -1;
  int window_right = -1;

  DASH_HOST_DEVICE constexpr int q_tiles() const { return (seqlen_q + block_m - 1) / block_m; }
  DASH_HOST_DEVICE constexpr int kv_tiles() const { return (seqlen_k + block_n - 1) / block_n; }

  // A sliding window is set (beyond what `causal` says). Raw values, not the
  // normalised ones: a choice made on it (resolve_schedule) is a function of
  // the request, never of a length.
  // Device code of the Plain kernels compiles windows out (always false
  // there; the dispatch sends every windowed request to a ScoreMods kernel):
  // reading window_left/right at run time cost the backward main kernel
  // spills (ptxas, bf16 hdim 128: 1024/1608 B spill stores/loads against
  // 796/1148 B without).
  DASH_HOST_DEVICE constexpr bool has_window() const {
    return mask::windows_compiled() && mask::requests_window(causal, window_left, window_right);
  }

  // Without a window exactly mask::causal_window(causal), as before windows.
  DASH_HOST_DEVICE constexpr mask::MaskWindow window() const {
    return has_window() ? mask::requested_window(causal, window_left, window_right, seqlen_q, seqlen_k)
                        : mask::causal_window(causal);
  }
  DASH_HOST_DEVICE constexpr mask::MaskGeometry mask_geometry() const {
    return mask::MaskGeometry{seqlen_q, seqlen_k, block_m, block_n, q_tiles(), kv_tiles(), window()};
  }

  // The band. Chain kv (KV tile kv) visits the Q tiles [q_begin(kv), q_end(kv)):
  // q_begin comes from the right side (causal or window.right), q_end from the
  // left side (window.left); without a left bound q_end = q_tiles(). Empty
  // chains (no row sees a key of the tile) have q_begin = q_end.
  DASH_HOST_DEVICE constexpr int q_begin(int kv) const { return mask_geometry().q_begin(kv); }
  DASH_HOST_DEVICE constexpr int q_end(int kv) const { return mask_geometry().q_end(kv); }

  DASH_HOST_DEVICE constexpr int chain_length(int kv) const {
    const mask::MaskGeometry g = mask_geometry();
    return g.q_end(kv) - g.q_begin(kv);
  }

  // The KV tiles contributing to dQ tile q are exactly [kv_begin(q), kv_end(q))
  // (both non-decreasing in q). Without a left bound kv_begin = 0; empty
  // (kv_begin = kv_end) when every row of q is masked (causal with
  // seqlen_q > seqlen_k, or a window that misses every key).
  DASH_HOST_DEVICE constexpr int kv_begin(int q) const { return mask_geometry().kv_begin(q); }
  DASH_HOST_DEVICE constexpr int kv_end(int q) const { return mask_geometry().kv_end(q); }
  DASH_HOST_DEVICE constexpr int contributors(int q) const {
    const mask::MaskGeometry g = mask_geometry();
    return g.kv_end(q) - g.kv_begin(q);
  }

  // KV tiles whose q_begin equals q_begin(kv): [level_begin, level_end).
  // Several KV tiles share a first Q tile when block_n < block_m or when
  // seqlen_k > seqlen_q clamps q_begin to 0; schedules break those ties by kv.
  // No left bound only (symmetric_shift's closed forms).
  DASH_HOST_DEVICE constexpr int level_begin(int kv) const {
    const int v = q_begin(kv);
    return v == 0 ? 0 : kv_end(v - 1);
  }
  DASH_HOST_DEVICE constexpr int level_end(int kv) const { return kv_end(q_begin(kv)); }

  // The step needs the element mask: the causal diagonal or a window edge
  // crosses the tile, or the KV tile runs past seqlen_k. The model prices
  // such steps as c_masked.
  DASH_HOST_DEVICE constexpr bool needs_mask(int q, int kv) const {
    return mask_geometry().tile_needs_mask(q, kv);
  }
};

}  // namespace dash_attn::schedule
