#include "varlen_trace.hpp"

namespace dash_attn::model {

VarlenBatch::VarlenBatch(const std::vector<std::pair<int, int>>& lengths, int heads_q, int heads_kv, int block_m,
                         int block_n, bool causal, int offset_q, int offset_k, int window_left,
                         int window_right) {
  p_.batch = static_cast<int>(lengths.size());
  p_.heads_q = heads_q;
  p_.heads_kv = heads_kv;
  p_.block_m = block_m;
  p_.block_n = block_n;
  p_.causal = causal;
  p_.window_left = window_left;
  p_.window_right = window_right;
  // A nonzero start offset stands for the packing position: it must not matter.
  cu_q_.push_back(offset_q);
  cu_k_.push_back(offset_k);
  for (const auto& [q, k] : lengths) {
    cu_q_.push_back(cu_q_.back() + q);
    cu_k_.push_back(cu_k_.back() + k);
  }
}

schedule::VarlenProblem VarlenBatch::get() const {
  schedule::VarlenProblem p = p_;
  p.cu_seqlens_q = cu_q_.data();
  p.cu_seqlens_k = cu_k_.data();
  return p;
}

ScheduleTrace build_varlen_trace(const schedule::VarlenProblem& p, schedule::VarlenClaims claims) {
  ScheduleTrace trace;
  trace.kind = ScheduleKind::kDescending;  // the per-sequence rule VarlenProblem applies
  trace.ordered = true;
  trace.group_size = p.group_size();
  trace.reduces_dkv = p.group_size() > 1;  // a chain per q-head (VarlenProblem)
  trace.coresidency = 1;  // every wait targets an earlier claim (claims_before)

  std::vector<int> dq_base(p.batch + 1, 0), dkv_base(p.batch + 1, 0);
  for (int s = 0; s < p.batch; ++s) {
    const schedule::HeadTiles t = p.head_tiles(s);
    dq_base[s + 1] = dq_base[s] + p.heads_q * t.q_tiles();
    dkv_base[s + 1] = dkv_base[s] + p.heads_kv * t.kv_tiles();
    for (int h = 0; h < p.heads_q; ++h)
      for (int q = 0; q < t.q_tiles(); ++q) trace.dq_contributors.push_back(t.contributors(q));
  }
  trace.num_dkv_tiles = dkv_base[p.batch];

  for (const schedule::VarlenChain& c : schedule::varlen_claim_order(p, claims)) {
    const schedule::HeadTiles t = p.head_tiles(c.sequence);
    trace.items.push_back(TraceItem{static_cast<int>(trace.chains.size()), 1});
    TraceChain chain;
    chain.batch = c.sequence;
    chain.head_q = c.head_q;
    chain.head_kv = c.head_q / p.group_size();
    chain.kv = c.kv;
    chain.dkv_tile = dkv_base[c.sequence] + chain.head_kv * t.kv_tiles() + c.kv;
    chain.dkv_rank = p.dkv_rank(c);
    const int length = p.chain_length(c);
    for (int step = 0; step < length; ++step) {
      const int q = p.q_tile(c, step);
      chain.steps.push_back(
          TraceStep{c.head_q, q, dq_base[c.sequence] + c.head_q * t.q_tiles() + q, p.dq_rank(c, q), t.needs_mask(q, c.kv)});
    }
    trace.chains.push_back(std::move(chain));
  }
  return trace;
}

}  // namespace dash_attn::model
