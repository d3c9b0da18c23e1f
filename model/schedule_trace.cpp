#include "schedule_trace.hpp"

#include "dash_attn/schedule/resolve.hpp"
#include "dash_attn/schedule/schedule.hpp"

namespace dash_attn::model {

ScheduleTrace build_trace(const schedule::TileProblem& problem, ScheduleKind requested, bool head_major,
                          int chain_heads) {
  const ScheduleKind kind = schedule::resolve_schedule(requested, problem);
  const int heads = chain_heads > 0 ? chain_heads : schedule::default_chain_heads(problem);
  const schedule::Schedule s = head_major ? schedule::Schedule(kind, 1, heads) : schedule::Schedule(kind, problem, heads);
  ScheduleTrace trace;
  trace.kind = s.kind();
  trace.ordered = s.ordered();
  trace.group_size = problem.group_size();
  trace.chain_heads = s.chain_heads();
  trace.reduces_dkv = s.reduces_dkv(problem);
  trace.coresidency = s.required_coresidency(problem);

  // Global tile ids: sequence-major, then head, then tile.
  std::vector<int> dq_base(problem.batch + 1, 0), dkv_base(problem.batch + 1, 0);
  for (int b = 0; b < problem.batch; ++b) {
    const schedule::HeadTiles t = problem.head_tiles(b);
    dq_base[b + 1] = dq_base[b] + problem.heads_q * t.q_tiles();
    dkv_base[b + 1] = dkv_base[b] + problem.heads_kv * t.kv_tiles();
    for (int h = 0; h < problem.heads_q; ++h)
      for (int q = 0; q < t.q_tiles(); ++q) trace.dq_contributors.push_back(t.contributors(q));
  }
  trace.num_dkv_tiles = dkv_base[problem.batch];

  const int total = s.total_items(problem);
  for (int k = 0; k < total; ++k) {
    const schedule::WorkItem item = s.work_item(problem, k);
    trace.items.push_back(TraceItem{static_cast<int>(trace.chains.size()), item.num_chains});
    for (int c = 0; c < item.num_chains; ++c) {
      TraceChain chain;
      chain.batch = item.batch;
      chain.head_q = item.head_q;
      chain.head_kv = item.head_kv;
      chain.kv = item.kv[c];
      const int n_q = item.tiles.q_tiles(), n_k = item.tiles.kv_tiles();
      chain.dkv_tile = dkv_base[item.batch] + item.head_kv * n_k + chain.kv;
      chain.dkv_rank = s.dkv_rank(problem, item.head_q);
      for (schedule::ChainCursor it = s.chain_walk(item.tiles, chain.kv); it.valid(); it.advance()) {
        const int q = it.q_tile(), head = item.head_q + it.pass();
        chain.steps.push_back(TraceStep{head, q, dq_base[item.batch] + head * n_q + q, it.rank(), it.needs_mask()});
      }
      trace.chains.push_back(std::move(chain));
    }
  }
  return trace;
}

}  // namespace dash_attn::model
