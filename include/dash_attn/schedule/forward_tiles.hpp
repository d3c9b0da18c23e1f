// Forward work partition: the order in which persistent CTAs take query tiles,
// how they claim them, and how many key tiles each query tile visits. CUDA-free and
// __host__ __device__, so the kernel and the CPU tests run the same code.
#pragma once

#include "dash_attn/host_device.hpp"
#include "dash_attn/mask/mask_geometry.hpp"
#include "dash_attn/tile_config.hpp"

namespace dash_attn::schedule {

struct ForwardWorkTile {
  int m_block;  // query tile within the (batch, head)
  int head;     // query head
  int batch;
};

// L2 sections, for both tile orders (ForwardPlan; VarlenForwardTiles within
// each sequence): the heads whose query tiles run together read
// kForwardL2SectionBytes of K and V, and at least one wave of tiles. With
// 32 MB the tiles in flight at hdim 128 full 4 x 4k spanned 16 heads and read
// 746 MB from DRAM (ncu, H200; ~268 MB are compulsory, FlashAttention-4 read
// 261 MB): a head's K/V left L2 before its later query tiles came. 8 MB keeps
// about one wave's heads: +2-6% on that row, 0-5% on the other hdim 64/128
// rows (H200, docs/perf_log.md 2026-12-03). Half a wave per section (hdim 256
// causal 4 x 4k: 2 heads of 32 tiles) cost 7%, so a section holds at least one
// wave. Banded masks (causal, windows) take the same budget since the
// thirty-second session: with 4x (32 MB) the first wave of a section read
// every head's K/V at once (its longest tiles), which cost hdim 128 causal
// 512 13% on an H100 (docs/perf_log.md, 2026-12-06).
inline constexpr long long kForwardL2SectionBytes = 8ll << 20;

// The budget in key rows of one query head: kv_row_bytes of K and V per key
// row over every KV head, shared by `heads` query heads (host side, once).
inline constexpr int forward_section_key_rows(long long kv_row_bytes, long long heads) {
  const long long rows = kForwardL2SectionBytes * heads / (kv_row_bytes > 1 ? kv_row_bytes : 1);
  return rows > (1ll << 30) ? 1 << 30 : static_cast<int>(rows);
}

// Causal or a window: masks whose query tiles visit different numbers of key
// tiles (and whose diagonal tiles forward_tile_for weighs).
DASH_HOST_DEVICE constexpr bool banded_mask(bool causal, int window_left, int window_right) {
  return causal || window_left >= 0 || window_right >= 0;
}

// How `heads` heads of m_blocks query tiles each are cut into sections: the
// heads per section, and the first head of the last section, which takes
// what is left from there.
struct ForwardSections {
  int heads_per_section = 1;
  int last_first_head = 0;
};
// For `grid` persistent CTAs over seqlen_k keys per head. Under a banded mask
// the longest tile of a section is about 2 m / (m + 1) times its mean (causal:
// m key tiles against (m + 1) / 2), and a section's longest tiles go first, so
// the last section must hold that many waves for its longest tiles to end with
// the launch: without it one-wave sections left hdim 128 causal 2k 5% behind
// (a last section of 2 heads, whose 16-key-tile tiles started last; H100,
// docs/perf_log.md 2026-12-06). Full masks: every tile alike, the last
// section is the remainder. 32-bit: the varlen producer warp decodes it per
// tile in 24 registers (64-bit divisions spilled 48 B there).
DASH_HOST_DEVICE constexpr ForwardSections forward_sections(int section_key_rows, int seqlen_k, int m_blocks,
                                                            int grid, int heads, bool banded) {
  const int budget = section_key_rows / (seqlen_k > 1 ? seqlen_k : 1);
  const int wave = m_blocks > 0 ? (grid + m_blocks - 1) / m_blocks : 1;
  const int wanted = budget > wave ? budget : wave;
  const int section_heads = wanted < 1 ? 1 : wanted > heads ? heads : wanted;
  const int last_heads = banded ? (2 * grid + m_blocks) / (m_blocks + 1) : 1;  // ceil(2 grid / (m + 1)) heads
  const int before_last = (heads - last_heads) / section_heads;
  return ForwardSections{section_heads, before_last > 0 ? before_last * section_heads : 0};
}

// Tile `index` of `heads` heads of m_blocks query tiles each, taken in
// sections: inside a section by descending m_block (under a causal mask the
// longest tiles start first and the short ones fill the tail), the section's
// heads side by side.
struct SectionTile {
  int m_block;
  int head;  // of the `heads` the order covers
};
DASH_HOST_DEVICE constexpr SectionTile section_tile(int index, ForwardSections sections, int m_blocks, int heads) {
  const int last_first_tile = sections.last_first_head * m_blocks;
  const bool in_last = index >= last_first_tile;
  const int section_tiles = sections.heads_per_section * m_blocks;
  const int section = in_last ? 0 : index / section_tiles;
  const int first_head = in_last ? sections.last_first_head : section * sections.heads_per_section;
  const int rest = in_last ? index - last_first_tile : index - section * section_tiles;
  const int heads_here = in_last ? heads - sections.last_first_head : sections.heads_per_section;
  return SectionTile{m_blocks - 1 - rest / heads_here, first_head + rest % heads_here};
}

// Plain data: computed once on the host, read by every CTA.
struct ForwardPlan {
  TileShape tile;
  int seqlen_q = 0;
  int seqlen_k = 0;
  bool causal = false;
  int m_blocks = 0;       // query tiles per (batch, head)
  int n_blocks = 0;       // key tiles per (batch, head)
  int heads = 0;          // heads_q
  int head_groups = 0;    // batch * heads_q
  ForwardSections sections;  // of the (batch, head) pairs, whose query tiles are interleaved
  int tiles = 0;          // m_blocks * head_groups
  int grid = 0;           // persistent CTAs: min(tiles, SMs)
  // Sliding window (FlashAttention's window_size, -1 unbounded; with causal
  // the right bound is 0). Honoured by the ScoreMods kernels only
  // (mask::windows_compiled).
  int window_left = -1;
  int window_right = -1;

  // Tile `index` of the global order: the (batch, head) pairs in L2 sections
  // (section_tile).
  DASH_HOST_DEVICE ForwardWorkTile work_tile(int index) const {
    const SectionTile at = section_tile(index, sections, m_blocks, head_groups);
    return ForwardWorkTile{at.m_block, at.head % heads, at.head / heads};
  }

  // Who takes which tile of that order (dynamic persistent schedule). CTA c
  // starts with tile c; every further tile is claimed from a global counter,
  // claim k (the counter's value before the increment) being tile grid + k, so
  // the CTA that frees up first takes the longest tile still waiting and the
  // causal imbalance is absorbed. `tiles` marks the end. A launch makes exactly
  // `tiles` claims (tiles - grid that get a tile and one empty-handed claim per
  // CTA), drawing the values 0 .. tiles - 1; the CTA that draws tiles - 1 thus
  // knows every claim of the launch is done and zeroes the counter, which the
  // next launch in the stream finds at zero.
  DASH_HOST_DEVICE int first_tile(int cta) const { return cta; }
  DASH_HOST_DEVICE int claimed_tile(int claim) const { return claim < tiles - grid ? grid + claim : tiles; }
  DASH_HOST_DEVICE bool is_last_claim(int claim) const { return claim == tiles - 1; }
  // Without a counter: tiles cta, cta + grid, ... (a static round robin).
  DASH_HOST_DEVICE int static_next_tile(int index) const { return index < tiles - grid ? index + grid : tiles; }

  // The mask rule (bottom-right causal, window, key tail) at the forward's
  // tile sizes, with the tile counts planned on the host so the kernel does not divide.
  DASH_HOST_DEVICE mask::MaskGeometry mask_geometry() const {
    return mask::MaskGeometry{seqlen_q, seqlen_k, tile.block_m, tile.block_n, m_blocks, n_blocks,
                              mask::windows_compiled()
                                  ? mask::requested_window(causal, window_left, window_right, seqlen_q, seqlen_k)
                                  : mask::causal_window(causal)};
  }

  // Key tiles [n_block_begin, n_block_end) that query tile m_block visits
  // (the window's band); empty when every row of the tile is fully masked
  // (bottom-right causal with seqlen_q > seqlen_k, a window past every key).
  DASH_HOST_DEVICE int n_block_begin(int m_block) const { return mask_geometry().kv_begin(m_block); }
  DASH_HOST_DEVICE int n_block_end(int m_block) const { return mask_geometry().kv_end(m_block); }

  // Whether some score of tile (m_block, n_block) is masked: the key tail
  // beyond seqlen_k, or a key right of the causal diagonal of the tile's first row.
  DASH_HOST_DEVICE bool needs_mask(int m_block, int n_block) const {
    return mask_geometry().tile_needs_mask(m_block, n_block);
  }
};

}  // namespace dash_attn::schedule
