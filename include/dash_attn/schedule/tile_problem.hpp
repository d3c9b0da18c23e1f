// The backward problem as the schedules see it: batch, heads, tiles, mask and
// per-sequence lengths. Plain data, valid on host and device.
//
// Sequence lengths come either from seqlen_q/seqlen_k (every sequence equal)
// or, for packed variable-length batches, from cu_seqlens_q/cu_seqlens_k
// (batch + 1 prefix sums, as FlashAttention's varlen functions take them).
// The pointers must address memory the caller can read: host arrays for the
// model, device arrays in a kernel.
#pragma once

#include "dash_attn/host_device.hpp"
#include "dash_attn/schedule/head_tiles.hpp"

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

  DASH_HOST_DEVICE int group_size() const { return heads_q / heads_kv; }
  DASH_HOST_DEVICE bool is_varlen() const { return cu_seqlens_q != nullptr || cu_seqlens_k != nullptr; }

  DASH_HOST_DEVICE int seqlen_q_of(int b) const {
    return cu_seqlens_q != nullptr ? cu_seqlens_q[b + 1] - cu_seqlens_q[b] : seqlen_q;
  }
  DASH_HOST_DEVICE int seqlen_k_of(int b) const {
    return cu_seqlens_k != nullptr ? cu_seqlens_k[b + 1] - cu_seqlens_k[b] : seqlen_k;
  }

  // Every head of sequence b has the same geometry.
  DASH_HOST_DEVICE HeadTiles head_tiles(int b) const {
    return HeadTiles{seqlen_q_of(b), seqlen_k_of(b), block_m, block_n, causal};
  }
};

}  // namespace dash_attn::schedule
