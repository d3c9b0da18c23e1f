// What the producer warp hands the other roles of the sm90 backward: the
// chains it claimed, in claim order (to the MMA warpgroups), and per Q-tile
// step where that step's partial dQ goes (to the dQ writer warp of the step's
// stage). The producer is the only role that claims and decodes work items,
// so the other roles run ahead into the next chain without a CTA barrier and
// the dQ writers, at 24 registers, decode nothing.
#pragma once

#include "dash_attn/schedule/head_tiles.hpp"

namespace dash_attn::sm90::bwd {

// One chain as the warp roles see it: KV tile `kv` of (batch, head_kv)
// against the Q tiles of (batch, head_q) and of the next q-heads of the
// group the chain walks (Schedule::chain_heads). kv < 0: the producer has claimed
// everything and the MMA warpgroups stop.
struct ChainWork {
  int batch, head_q, head_kv, kv;
  schedule::HeadTiles tiles;

  __host__ __device__ bool done() const { return kv < 0; }
};

// One partial dQ tile's add: which Q tile over all (batch, q-head) pairs
// (the index of its fp32 accumulator tile and of its counter) and the step
// that made it (KV tile, Q tile, and its sequence's lengths as the producer's
// chain holds them), from which the writer derives the rank the add waits
// for: the producer has no registers left for the wave schedules' rank
// arithmetic, and with the lengths here a varlen writer reads no cu_seqlens
// (reading them per task cost two dependent global-load chains, 2.7-3.1x the
// writer's instructions at equal lengths, ncu, thirtieth session). tile < 0:
// no more adds for this stage, the writer stops.
struct DqTask {
  int tile;
  int kv, q_tile;
  int seqlen_q, seqlen_k;

  __host__ __device__ bool done() const { return tile < 0; }
};

}  // namespace dash_attn::sm90::bwd
