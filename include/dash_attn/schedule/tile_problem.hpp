// The backward problem as the schedules see it: batch, heads, tiles, mask and
// per-sequence lengths. Plain data, valid on host and device.
//
// Sequence lengths come either from seqlen_q/seqlen_k (every sequence equal)
// or, for packed variable-length batches, from cu_seqlens_q/cu_seqlens_k
// (batch + 1 prefix sums, as FlashAttention's varlen functions take them).
// The pointers must address memory the caller can read: host arrays for the
// model, device arrays in a kernel. A kernel also sets the bounds (packed
// totals, max_seqlen, seqused), so its rows stay inside the tensors and the
// grids sized by max_seqlen whatever the arrays hold (sequence_rows.hpp).
#pragma once

#include "dash_attn/host_device.hpp"
#include "dash_attn/schedule/head_tiles.hpp"
#include "dash_attn/schedule/sequence_rows.hpp"

namespace dash_attn::schedule {

struct TileProblem {
  int batch = 0;
  int heads_q = 0;
  int heads_kv = 0;  // divides heads_q; heads_q / heads_kv q-heads share a KV head
  int block_m = 1;
  int block_n = 1;
  bool causal = false;
  int seqlen_q = 0;  // used when cu_seqlens_q is null
  int seqlen_k = 0;  // used when cu_seqlens_k is null
  const int* cu_seqlens_q = nullptr;
  const int* cu_seqlens_k = nullptr;
  const int* seqused_q = nullptr;  // optional used lengths (FA3's seqused_q / seqused_k)
  const int* seqused_k = nullptr;
  int total_q = kNoRowBound;       // rows of the packed tensors
  int total_k = kNoRowBound;
  int max_seqlen_q = kNoRowBound;  // longer sequences are cut to this length
  int max_seqlen_k = kNoRowBound;
  // Sliding window (HeadTiles' meaning: FlashAttention's window_size, causal
  // with a window is (window_left, 0)). Last, so that existing brace
  // initializers keep meaning "no window".
  int window_left = -1;
  int window_right = -1;

  // HeadTiles' rule (any sequence's: it reads no length).
  DASH_HOST_DEVICE bool has_window() const { return HeadTiles{0, 0, 1, 1, causal, window_left, window_right}.has_window(); }

  DASH_HOST_DEVICE int group_size() const { return heads_q / heads_kv; }
  DASH_HOST_DEVICE bool is_varlen() const { return cu_seqlens_q != nullptr || cu_seqlens_k != nullptr; }

  // Sequence b's rows in the packed tensors ({0, seqlen} without cu_seqlens).
  DASH_HOST_DEVICE SequenceRows rows_q(int b) const {
    return cu_seqlens_q != nullptr ? sequence_rows(cu_seqlens_q, seqused_q, total_q, b, max_seqlen_q)
                                   : SequenceRows{0, seqlen_q};
  }
  DASH_HOST_DEVICE SequenceRows rows_k(int b) const {
    return cu_seqlens_k != nullptr ? sequence_rows(cu_seqlens_k, seqused_k, total_k, b, max_seqlen_k)
                                   : SequenceRows{0, seqlen_k};
  }
  DASH_HOST_DEVICE int seqlen_q_of(int b) const { return rows_q(b).length; }
  DASH_HOST_DEVICE int seqlen_k_of(int b) const { return rows_k(b).length; }

  // Every head of sequence b has the same geometry.
  DASH_HOST_DEVICE HeadTiles head_tiles(int b) const { return tiles_of_lengths(seqlen_q_of(b), seqlen_k_of(b)); }
  // The geometry of a sequence whose lengths are already known (read once by
  // head_tiles): the kernel's roles pass lengths along instead of re-reading
  // the varlen arrays.
  DASH_HOST_DEVICE HeadTiles tiles_of_lengths(int sequence_q, int sequence_k) const {
    return HeadTiles{sequence_q, sequence_k, block_m, block_n, causal, window_left, window_right};
  }
};

}  // namespace dash_attn::schedule
