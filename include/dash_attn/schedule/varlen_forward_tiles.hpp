// The forward's work over a variable-length batch: which query tiles exist,
// in what order the persistent CTAs take them, and each tile's sequence
// geometry. The lengths come from the device arrays of VarlenLengths, so the
// host knows neither the tile count nor where a sequence's tiles start: the
// kernel finds them with a prefix sum over the sequences' tile counts
// (common/sequence_scan_sm90.hpp, one warp, 32 sequences per step). CUDA-free
// and __host__ __device__ so the CPU tests walk the same order over host
// arrays.
//
// Order: sequence-major, and inside sequence s its query tiles * heads tiles
// by descending m_block, heads interleaved (under a causal mask the longest
// tiles start first; the q-heads of a GQA group run side by side on one K/V).
// Claims follow ForwardPlan's rule: CTA c starts with tile c, claim k is tile
// grid + k, each CTA ends with one empty-handed claim; so a launch draws
// max(tiles, grid) claims and the CTA that draws the last one zeroes the
// counter. The order changes which CTA computes a tile, never its bits.
#pragma once

#include <cstdint>

#include "dash_attn/host_device.hpp"
#include "dash_attn/mask/mask_geometry.hpp"
#include "dash_attn/schedule/forward_tiles.hpp"
#include "dash_attn/schedule/sequence_rows.hpp"
#include "dash_attn/tile_config.hpp"

namespace dash_attn::schedule {

// One query tile of a varlen batch and its sequence's rows. sequence ==
// batch marks the end of the work.
struct VarlenForwardWork {
  int m_block = 0;
  int head = 0;
  int sequence = 0;
  int q_offset = 0;  // first row of the sequence in the packed Q / out / lse
  int k_offset = 0;  // first row in the packed K / V
  int seqlen_q = 0;
  int seqlen_k = 0;
};

struct VarlenForwardTiles {
  TileShape tile;
  int batch = 0;  // sequences
  int heads = 0;  // heads_q
  bool causal = false;
  int total_q = 0;
  int total_k = 0;
  int grid = 0;
  const int32_t* cu_seqlens_q = nullptr;
  const int32_t* cu_seqlens_k = nullptr;
  const int32_t* seqused_q = nullptr;  // optional
  const int32_t* seqused_k = nullptr;
  int window_left = -1;  // as ForwardPlan's: each sequence's own band
  int window_right = -1;
  int section_key_rows = 1 << 30;  // the L2 sections' budget (forward_section_key_rows)

  // Rows of sequence s in the packed tensors (clamped: sequence_rows.hpp).
  DASH_HOST_DEVICE SequenceRows rows_q(int s) const { return sequence_rows(cu_seqlens_q, seqused_q, total_q, s); }
  DASH_HOST_DEVICE SequenceRows rows_k(int s) const { return sequence_rows(cu_seqlens_k, seqused_k, total_k, s); }

  // The queries below take the tile sizes as an argument: the kernel passes
  // its compile-time tile (the launch checked that it is `tile`), so their
  // divisions by block_m and block_n compile to multiplies instead of a
  // runtime division each (MUFU.RCP plus ~20 instructions, on the units the
  // softmax needs); host code and tests pass `tile`.
  DASH_HOST_DEVICE static int m_blocks(int seqlen_q, TileShape t) { return (seqlen_q + t.block_m - 1) / t.block_m; }
  // Query tiles of sequence s; 0 when it has no query rows. (A sequence with
  // rows but no keys keeps its tiles: its rows get out = 0 and lse = -inf.)
  DASH_HOST_DEVICE int tiles_of(int s, TileShape t) const { return m_blocks(rows_q(s).length, t) * heads; }
  DASH_HOST_DEVICE int tiles_of(int s) const { return tiles_of(s, tile); }

  // Tile `local` of sequence s (0 <= local < tiles_of(s)): the sequence's
  // heads in L2 sections as a fixed-length batch's (section_tile), which a
  // long sequence needs (hdim 128 full 2 x 8k: 16 heads of 4 MB K/V each
  // in flight at once read 0.90 of the fixed-length kernel, H200 2026-12-03).
  // A sequence whose heads' keys all fit the budget is one section, decoded
  // with one division instead of section_tile's four: the general decode cost
  // 512-row sequences 6-7% of the forward (varlen / fixed, hdim 128 full 0.97
  // -> 0.90, H200, docs/perf_log.md sixteenth session), the same order.
  DASH_HOST_DEVICE VarlenForwardWork work(int s, int local, TileShape t) const {
    const SequenceRows q = rows_q(s), k = rows_k(s);
    const int m = m_blocks(q.length, t);
    if (static_cast<long long>(k.length) * heads <= section_key_rows) {
      return VarlenForwardWork{m - 1 - local / heads, local % heads, s, q.begin, k.begin, q.length, k.length};
    }
    const ForwardSections sections =
        forward_sections(section_key_rows, k.length, m, grid, heads, banded_mask(causal, window_left, window_right));
    const SectionTile at = section_tile(local, sections, m, heads);
    return VarlenForwardWork{at.m_block, at.head, s, q.begin, k.begin, q.length, k.length};
  }
  DASH_HOST_DEVICE VarlenForwardWork work(int s, int local) const { return work(s, local, tile); }
  DASH_HOST_DEVICE VarlenForwardWork end_of_work() const { return VarlenForwardWork{0, 0, batch, 0, 0, 0, 0}; }
  DASH_HOST_DEVICE bool done(const VarlenForwardWork& w) const { return w.sequence >= batch; }

  // The mask rule of the tile's own sequence (its lengths alone: what makes a
  // sequence's bits independent of its neighbours).
  DASH_HOST_DEVICE mask::MaskGeometry mask_geometry(const VarlenForwardWork& w, TileShape t) const {
    return mask::MaskGeometry{w.seqlen_q,
                              w.seqlen_k,
                              t.block_m,
                              t.block_n,
                              m_blocks(w.seqlen_q, t),
                              (w.seqlen_k + t.block_n - 1) / t.block_n,
                              mask::windows_compiled()
                                  ? mask::requested_window(causal, window_left, window_right, w.seqlen_q, w.seqlen_k)
                                  : mask::causal_window(causal)};
  }

  DASH_HOST_DEVICE int first_tile(int cta) const { return cta; }
  DASH_HOST_DEVICE int claimed_tile(int claim) const { return grid + claim; }
  DASH_HOST_DEVICE int static_next_tile(int index) const { return index + grid; }
  // `tiles` is the batch's tile count, which the CTA drawing an empty-handed
  // claim has just summed.
  DASH_HOST_DEVICE static bool is_last_claim(int claim, int tiles, int grid) {
    return claim == (tiles > grid ? tiles : grid) - 1;
  }
};

// One varlen tile's mask source, asked as a ForwardPlan is for a fixed batch
// (tile: the kernel's compile-time tile, see mask_geometry).
struct VarlenTileMasks {
  const VarlenForwardTiles* tiles;
  VarlenForwardWork work;
  TileShape tile;
  DASH_HOST_DEVICE mask::MaskGeometry mask_geometry() const { return tiles->mask_geometry(work, tile); }
};

// The host's bound on the batch's tiles (it sizes the grid): every sequence
// at the longest length.
inline long long varlen_forward_tile_bound(long long batch, long long heads, long long max_seqlen_q, int block_m) {
  return batch * heads * ((max_seqlen_q + block_m - 1) / block_m);
}

}  // namespace dash_attn::schedule
