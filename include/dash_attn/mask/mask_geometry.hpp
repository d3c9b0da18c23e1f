// Mask geometry of one (batch, head) sequence pair: which keys each query row
// sees, and what that means for (Q tile, KV tile) pairs. The only place the
// rule is written down: the backward's trip counts (schedule/head_tiles.hpp),
// the forward's key ranges (src/host/forward_plan.hpp) and the fp64 reference
// derive from it, and so do both kernels' element masks
// (key_limit_none_or_causal, tile_local_mask_none_or_causal).
//
// The rule is FlashAttention's, bottom-right aligned: with
// offset = seqlen_k - seqlen_q, query row r sees key c (0 <= c < seqlen_k) iff
//   r + offset - window.left <= c <= r + offset + window.right,
// a negative bound meaning unbounded on that side. No mask is the window
// (-1, -1), causal is (-1, 0). Varlen: one geometry per sequence, built with
// that sequence's lengths.
//
// Tiles: Q tile q holds rows [q * block_m, (q + 1) * block_m), KV tile kv keys
// [kv * block_n, (kv + 1) * block_n). Rows past seqlen_q are padding whose
// results are dropped, so they never make a tile masked; keys past seqlen_k
// would enter the softmax of real rows, so a KV tile that runs past seqlen_k is
// always (at least partly) masked.
//
// 32-bit arithmetic, ordered so that no mask and causal never overflow for
// lengths < 2^31; a bounded window also needs seqlen_q + seqlen_k < 2^31.
// Header-only and allocation-free: the kernels include it.
#pragma once

#include "dash_attn/host_device.hpp"

// 1: device code honours sliding windows (windows_compiled). The ScoreMods
// rows of the kernel table compile with 1, the Plain rows with 0
// (cmake/kernel_table.cmake), so that the latter keep their code.
#ifndef DASH_DEVICE_WINDOWS
#define DASH_DEVICE_WINDOWS 0
#endif

namespace dash_attn::mask {

// False in device code built without windows: requests_window and the plans'
// windows then fold to "none" (the dispatch sends every windowed request to
// a ScoreMods kernel). Always true on the host.
DASH_HOST_DEVICE constexpr bool windows_compiled() {
#if defined(__CUDA_ARCH__) && !DASH_DEVICE_WINDOWS
  return false;
#else
  return true;
#endif
}

// Rounds toward minus infinity (C++ '/' rounds toward zero). b > 0.
DASH_HOST_DEVICE constexpr int floor_div(int a, int b) { return a >= 0 ? a / b : -((-a + b - 1) / b); }

DASH_HOST_DEVICE constexpr int clamp_int(int v, int lo, int hi) { return v < lo ? lo : v > hi ? hi : v; }

// Keys a row sees left and right of its diagonal key r + offset; negative:
// unbounded on that side.
struct MaskWindow {
  int left = -1;
  int right = -1;
};

DASH_HOST_DEVICE constexpr MaskWindow causal_window(bool causal) { return MaskWindow{-1, causal ? 0 : -1}; }

// FlashAttention's window_size = (left, right). A bound that reaches past every
// key it could cut (left >= seqlen_k, right >= seqlen_q) hides nothing, so it
// becomes unbounded, which keeps r + offset +- bound inside 32 bits.
DASH_HOST_DEVICE constexpr MaskWindow sliding_window(int left, int right, int seqlen_q, int seqlen_k) {
  return MaskWindow{left < 0 || left >= seqlen_k ? -1 : left, right < 0 || right >= seqlen_q ? -1 : right};
}

// What a request asks for: causal and FlashAttention's window_size together
// (causal forces right = 0). A window is set when it bounds more than causal
// does; without one this is exactly causal_window(causal).
DASH_HOST_DEVICE constexpr bool requests_window(bool causal, int left, int right) {
  return left >= 0 || (!causal && right >= 0);
}
DASH_HOST_DEVICE constexpr MaskWindow requested_window(bool causal, int left, int right, int seqlen_q, int seqlen_k) {
  return requests_window(causal, left, right) ? sliding_window(left, causal ? 0 : right, seqlen_q, seqlen_k)
                                              : causal_window(causal);
}

enum class TileMask { kFullyMasked, kPartlyMasked, kUnmasked };

// Visibility of one (Q tile, KV tile) pair in tile-local coordinates (key in
// [0, block_n), row in [0, block_m)): one subtraction and compares per element,
// the shape the backward's per-element mask needs.
struct TileLocalMask {
  int keys_left;          // keys of the tile before seqlen_k
  int max_key_minus_row;  // key - row above this lies right of the window
  int min_key_minus_row;  // key - row below this lies left of the window

  // Without a left bound min_key_minus_row = -block_m lies below every in-tile
  // key - row, so a kernel that has none (no window before issue 18) skips
  // that compare: hidden<false> is one instruction fewer per element.
  template <bool kLeftBound = true>
  DASH_HOST_DEVICE constexpr bool hidden(int key, int row) const {
    return key >= keys_left || key - row > max_key_minus_row || (kLeftBound && key - row < min_key_minus_row);
  }
  DASH_HOST_DEVICE constexpr bool visible(int key, int row) const { return !hidden(key, row); }
  // hidden<true> for a tile with work (some element visible, so
  // min_key_minus_row <= max_key_minus_row), with one unsigned compare for
  // both edges: min <= key - row <= max. The ScoreMods backward's step loop
  // spilled with the third compare per element (hdim 64: 25 LDL / 23 STL in
  // the loop, none with two compares; nvdisasm -g, 2026-12-02).
  DASH_HOST_DEVICE constexpr bool hidden_in_band(int key, int row) const {
    return key >= keys_left || static_cast<unsigned>(key - row - min_key_minus_row) >
                                   static_cast<unsigned>(max_key_minus_row - min_key_minus_row);
  }
};

struct MaskGeometry {
  int seqlen_q = 0;
  int seqlen_k = 0;
  int block_m = 1;  // block sizes and tile counts only matter to the tile queries
  int block_n = 1;
  int q_tiles = 0;  // ceil(seqlen_q / block_m); passed in where a plan has it already
  int kv_tiles = 0;  // ceil(seqlen_k / block_n)
  MaskWindow window;

  DASH_HOST_DEVICE constexpr bool has_left_bound() const { return window.left >= 0; }
  DASH_HOST_DEVICE constexpr bool has_right_bound() const { return window.right >= 0; }
  // Key column of row r's diagonal is r + diagonal_offset() (bottom-right alignment).
  DASH_HOST_DEVICE constexpr int diagonal_offset() const { return seqlen_k - seqlen_q; }

  // ---- per row (0 <= row < seqlen_q) ----
  // Visible keys [col_begin(row), col_end(row)); an empty row gives [0, 0).
  DASH_HOST_DEVICE constexpr int col_begin(int row) const {
    if (!has_left_bound()) return 0;
    const int first = row + diagonal_offset() - window.left;
    return first > 0 ? first : 0;
  }
  // A padding row (row >= seqlen_q) gets seqlen_k under causal: its diagonal
  // lies past the last key.
  DASH_HOST_DEVICE constexpr int col_end(int row) const {
    const int limit = key_limit(row);
    return limit > 0 ? limit : 0;
  }
  // Keys >= key_limit(row) are hidden from the row (the window's right edge
  // and the seqlen_k tail): the forward's per-row element mask. Not clamped
  // at 0 as col_end is (a limit <= 0 hides every key all the same).
  DASH_HOST_DEVICE constexpr int key_limit(int row) const {
    const int diagonal_limit = row + 1 + window.right + seqlen_k - seqlen_q;
    return has_right_bound() && diagonal_limit < seqlen_k ? diagonal_limit : seqlen_k;
  }
  DASH_HOST_DEVICE constexpr bool visible(int row, int col) const {
    return col >= col_begin(row) && col < col_end(row);
  }

  // ---- tile bounds ----
  DASH_HOST_DEVICE constexpr int first_row(int q) const { return q * block_m; }
  // Last real row of Q tile q; written so that (q + 1) * block_m is never formed.
  DASH_HOST_DEVICE constexpr int last_row(int q) const {
    return seqlen_q - first_row(q) > block_m ? first_row(q) + block_m - 1 : seqlen_q - 1;
  }
  DASH_HOST_DEVICE constexpr int first_key(int kv) const { return kv * block_n; }
  // Last real key of KV tile kv.
  DASH_HOST_DEVICE constexpr int last_key(int kv) const {
    return seqlen_k - first_key(kv) > block_n ? first_key(kv) + block_n - 1 : seqlen_k - 1;
  }

  // ---- per Q tile: KV tiles with a visible key, [kv_begin(q), kv_end(q)) ----
  // The keys a tile's rows see form one interval (each row's range is the
  // previous one shifted by one key), from its first row's col_begin to its
  // last row's col_end; these are the KV tiles that interval touches. Empty
  // gives [0, 0).
  DASH_HOST_DEVICE constexpr int kv_begin(int q) const {
    if (!has_left_bound()) return 0;
    return clamp_int(floor_div(first_row(q) + diagonal_offset() - window.left, block_n), 0, kv_tiles);
  }
  DASH_HOST_DEVICE constexpr int kv_end(int q) const {
    if (!has_right_bound()) return kv_tiles;
    return clamp_int(floor_div(last_row(q) + diagonal_offset() + window.right, block_n) + 1, 0, kv_tiles);
  }

  // ---- per KV tile: Q tiles with a row that sees one of its keys, [q_begin(kv), q_end(kv)) ----
  // Row r sees a key of [first, last] iff first - offset - right <= r <= last - offset + left.
  // Empty gives [0, 0).
  DASH_HOST_DEVICE constexpr int q_begin(int kv) const {
    if (!has_right_bound()) return 0;
    return clamp_int(floor_div(first_key(kv) - diagonal_offset() - window.right, block_m), 0, q_tiles);
  }
  DASH_HOST_DEVICE constexpr int q_end(int kv) const {
    if (!has_left_bound()) return q_tiles;
    return clamp_int(floor_div(last_key(kv) - diagonal_offset() + window.left, block_m) + 1, 0, q_tiles);
  }

  // ---- per (Q tile, KV tile) ----
  DASH_HOST_DEVICE constexpr bool tile_has_work(int q, int kv) const { return kv_begin(q) <= kv && kv < kv_end(q); }
  // Some element of a real row is hidden: the tile runs past seqlen_k, or the
  // window's right edge cuts its first row (which sees the fewest keys on the
  // right), or its left edge cuts its last row (the fewest on the left).
  DASH_HOST_DEVICE constexpr bool tile_needs_mask(int q, int kv) const {
    if (seqlen_k - first_key(kv) < block_n) return true;
    const int tile_last_key = first_key(kv) + block_n - 1;
    const bool cut_right = has_right_bound() && tile_last_key > first_row(q) + diagonal_offset() + window.right;
    const bool cut_left = has_left_bound() && first_key(kv) < last_row(q) + diagonal_offset() - window.left;
    return cut_right || cut_left;
  }
  // The same answer for every KV tile of Q tile q at once: tile_needs_mask(q,
  // kv) is false exactly on [unmasked_kv_begin(q), unmasked_kv_end(q)) (the
  // range may be empty; it is not clamped to the tiles with work). A loop
  // over a tile's keys then tests a range instead of the geometry.
  DASH_HOST_DEVICE constexpr int unmasked_kv_begin(int q) const {
    if (!has_left_bound()) return 0;
    return -floor_div(-(last_row(q) + diagonal_offset() - window.left), block_n);  // no left cut
  }
  DASH_HOST_DEVICE constexpr int unmasked_kv_end(int q) const {
    const int past_tail = seqlen_k / block_n;  // tiles from here on run past seqlen_k
    if (!has_right_bound()) return past_tail;
    const int right_cut = floor_div(first_row(q) + diagonal_offset() + window.right + 1, block_n);
    return right_cut < past_tail ? right_cut : past_tail;
  }
  DASH_HOST_DEVICE constexpr TileMask classify_tile(int q, int kv) const {
    if (!tile_has_work(q, kv)) return TileMask::kFullyMasked;
    return tile_needs_mask(q, kv) ? TileMask::kPartlyMasked : TileMask::kUnmasked;
  }
  // Element visibility inside tile (q, kv). An unbounded side gets a limit
  // that every in-tile key - row (in (-block_m, block_n)) satisfies.
  DASH_HOST_DEVICE constexpr TileLocalMask tile_local_mask(int q, int kv) const {
    const int diagonal = first_row(q) + diagonal_offset() - first_key(kv);  // key - row on the diagonal
    return TileLocalMask{seqlen_k - first_key(kv), has_right_bound() ? diagonal + window.right : block_n,
                         has_left_bound() ? diagonal - window.left : -block_m};
  }

  // ---- the kernels' element masks for no mask and causal ----
  // The forms the kernels were tuned with (a bool, no window arithmetic):
  // equal to key_limit and tile_local_mask for those two windows (tested),
  // which is all the kernels accept until sliding windows land. Written with
  // window.right, the compiler keeps a select and an add of the window per
  // row that `is_causal() &&` does not have (different SASS).
  DASH_HOST_DEVICE constexpr bool is_causal() const { return window.left < 0 && window.right == 0; }
  DASH_HOST_DEVICE constexpr int key_limit_none_or_causal(int row) const {
    const int diagonal_limit = row + 1 + seqlen_k - seqlen_q;
    return is_causal() && diagonal_limit < seqlen_k ? diagonal_limit : seqlen_k;
  }
  // The backward kernel builds its geometry with its compile-time block
  // sizes, so first_row, first_key and block_n fold to constants; test with
  // hidden<false> (no left bound).
  DASH_HOST_DEVICE constexpr TileLocalMask tile_local_mask_none_or_causal(int q, int kv) const {
    const int key_base = first_key(kv);
    return TileLocalMask{seqlen_k - key_base, is_causal() ? seqlen_k - seqlen_q + first_row(q) - key_base : block_n,
                         -block_m};
  }
};

// Tile counts computed here; a caller that has them (the forward plan) may
// aggregate-initialize MaskGeometry with its own instead.
DASH_HOST_DEVICE constexpr MaskGeometry mask_geometry(int seqlen_q, int seqlen_k, int block_m, int block_n,
                                                      MaskWindow window) {
  const int q_tiles = (seqlen_q + block_m - 1) / block_m;
  const int kv_tiles = (seqlen_k + block_n - 1) / block_n;
  return MaskGeometry{seqlen_q, seqlen_k, block_m, block_n, q_tiles, kv_tiles, window};
}

}  // namespace dash_attn::mask
