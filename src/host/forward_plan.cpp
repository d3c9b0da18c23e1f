#include "dash_attn/plan/forward_plan.hpp"

#include <algorithm>
#include <limits>

#include "dash_attn/error.hpp"

namespace dash_attn::host {

namespace {
// The L2 sections' budget in key rows per query head: K and V (2-byte
// elements) of every KV head, shared by the query heads.
int section_key_rows(const ProblemShape& s) {
  return schedule::forward_section_key_rows(2 * 2 * s.head_dim * s.heads_kv, s.heads_q);
}
}  // namespace

schedule::ForwardPlan plan_forward(const ProblemShape& s, bool causal, int sm_count, int window_left,
                                   int window_right) {
  schedule::ForwardPlan p;
  const bool banded = schedule::banded_mask(causal, window_left, window_right);
  p.tile = forward_tile_for(static_cast<int>(s.head_dim), banded, s.seqlen_q);
  p.seqlen_q = static_cast<int>(s.seqlen_q);
  p.seqlen_k = static_cast<int>(s.seqlen_k);
  p.causal = causal;
  p.window_left = window_left;
  p.window_right = window_right;
  p.m_blocks = ceil_div(p.seqlen_q, p.tile.block_m);
  p.n_blocks = ceil_div(p.seqlen_k, p.tile.block_n);
  p.heads = static_cast<int>(s.heads_q);
  const long long groups = s.batch * s.heads_q;
  if (groups > std::numeric_limits<int>::max() / p.m_blocks)
    throw Error(ErrorCode::kNotSupported, "forward: batch * heads_q * query tiles overflows the 32-bit tile index");
  p.head_groups = static_cast<int>(groups);
  p.tiles = p.m_blocks * p.head_groups;
  p.grid = std::max(1, std::min(p.tiles, sm_count));
  // L2 sections (schedule::kForwardL2SectionBytes says why).
  p.sections = schedule::forward_sections(section_key_rows(s), p.seqlen_k, p.m_blocks, p.grid, p.head_groups, banded);
  return p;
}

schedule::VarlenForwardTiles plan_forward_varlen(const ProblemShape& s, const VarlenLengths& lengths, bool causal,
                                                 int sm_count, int window_left, int window_right) {
  schedule::VarlenForwardTiles t;
  // s.seqlen_q is the batch's max_seqlen_q.
  t.tile = forward_tile_for(static_cast<int>(s.head_dim), schedule::banded_mask(causal, window_left, window_right),
                           s.seqlen_q);
  t.batch = static_cast<int>(s.batch);
  t.heads = static_cast<int>(s.heads_q);
  t.causal = causal;
  t.window_left = window_left;
  t.window_right = window_right;
  t.total_q = static_cast<int>(lengths.total_q);
  t.total_k = static_cast<int>(lengths.total_k);
  t.cu_seqlens_q = lengths.cu_seqlens_q;
  t.cu_seqlens_k = lengths.cu_seqlens_k;
  t.seqused_q = lengths.seqused_q;
  t.seqused_k = lengths.seqused_k;
  const long long bound = schedule::varlen_forward_tile_bound(s.batch, s.heads_q, s.seqlen_q, t.tile.block_m);
  t.grid = static_cast<int>(std::max(1ll, std::min<long long>(bound, sm_count)));
  t.section_key_rows = section_key_rows(s);
  return t;
}

}  // namespace dash_attn::host
