// Plans the forward's persistent work partition on the host (the tile order
// itself, which the kernel runs, is schedule::ForwardPlan in forward_tiles.hpp).
#pragma once

#include "dash_attn/schedule/forward_tiles.hpp"
#include "dash_attn/schedule/varlen_forward_tiles.hpp"
#include "dash_attn/types.hpp"

namespace dash_attn::host {

// K and V bytes of the heads whose tiles run together (a section), and at
// least one wave of tiles in a section. With 32 MB the tiles in flight at
// hdim 128 full 4 x 4k spanned 16 heads and read 746 MB from DRAM (ncu, H200;
// ~268 MB are compulsory, FlashAttention-4 read 261 MB): a head's K/V left L2
// before its later query tiles came. 8 MB keeps about one wave's heads: +2-6%
// on that row, 0-5% on the other hdim 64/128 rows (H200, docs/perf_log.md
// 2026-12-03). Half a wave per section (hdim 256 causal 4 x 4k: 2 heads of 32
// tiles) cost 7%; a floor of two waves under banded masks read 2-5% below
// the 32 MB order on long causal rows beside the peers, so one wave it is.
inline constexpr long long kForwardL2SectionBytes = 8ll << 20;

// window_left / window_right: Options' sliding window (-1: unbounded).
schedule::ForwardPlan plan_forward(const ProblemShape& shape, bool causal, int sm_count, int window_left = -1,
                                   int window_right = -1);

// A varlen batch: shape.seqlen_q (max_seqlen_q) bounds the tiles and so the
// grid; the tiles themselves are found on the device from the lengths.
schedule::VarlenForwardTiles plan_forward_varlen(const ProblemShape& shape, const VarlenLengths& lengths, bool causal,
                                                 int sm_count, int window_left = -1, int window_right = -1);

}  // namespace dash_attn::host
