// Plans the forward's persistent work partition on the host (the tile order
// itself, which the kernel runs, is schedule::ForwardPlan in forward_tiles.hpp).
#pragma once

#include "dash_attn/schedule/forward_tiles.hpp"
#include "dash_attn/schedule/varlen_forward_tiles.hpp"
#include "dash_attn/types.hpp"

namespace dash_attn::host {

// window_left / window_right: Options' sliding window (-1: unbounded).
schedule::ForwardPlan plan_forward(const ProblemShape& shape, bool causal, int sm_count, int window_left = -1,
                                   int window_right = -1);

// A varlen batch: shape.seqlen_q (max_seqlen_q) bounds the tiles and so the
// grid; the tiles themselves are found on the device from the lengths.
schedule::VarlenForwardTiles plan_forward_varlen(const ProblemShape& shape, const VarlenLengths& lengths, bool causal,
                                                 int sm_count, int window_left = -1, int window_right = -1);

}  // namespace dash_attn::host
