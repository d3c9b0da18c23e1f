// Vocabulary shared by the schedules of the deterministic backward, and how a
// kernel uses them. Everything here is plain data and DASH_HOST_DEVICE: the
// kernel (src/kernels/sm90) and the DAG model (model/) run the same code.
//
// Terms. A chain is the work of one KV tile (batch, q-head, kv) against the Q
// tiles it sees; it stays on one CTA (dK, dV accumulate in registers). Under
// GQA a chain may walk several q-heads of the KV head, one after the other
// (Schedule::chain_heads); each q-head's pass is the same Q-tile order. Each
// step of a chain adds a partial dQ tile into the fp32 accumulator of one Q
// tile; the adds into a dQ tile happen in a fixed order, and a contribution's
// rank is its position in that order. A work item is what a CTA claims at
// once: one chain, or for symmetric_shift a pair of chains run back to back.
//
// How a kernel uses a schedule (see schedule.hpp for the calls):
//
//   ScheduleKind k = resolve_schedule(kind, problem);            // host, once per call
//   Schedule s{k, problem, default_chain_heads(problem)};  // the kernel's claim order
//   total = s.total_items(problem);                    // grid work count
//   // device, per CTA; the claim counter is zeroed by the preprocess kernel
//   for (int k = atomicAdd(&claim, 1); k < total; k = atomicAdd(&claim, 1)) {
//     WorkItem item = s.work_item(problem, k);
//     for (int c = 0; c < item.num_chains; ++c) {
//       load K, V of (item.batch, item.head_kv, item.kv[c]);
//       for (ChainCursor it = s.chain_walk(item.tiles, item.kv[c]); it.valid(); it.advance()) {
//         h = item.head_q + it.pass();                 // the step's q-head
//         compute tile it.q_tile() of q-head h (mask iff it.needs_mask());
//         counter = dq_counter[item.batch][h][it.q_tile()];
//         spin (acquire) until counter == it.rank();    // skip for kUnordered
//         bulk reduce-add the partial dQ (rank 0: bulk store, the
//         accumulator is not zeroed); wait until it *completed*;
//         release: fence + counter += 1;
//       }
//       s.reduces_dkv(problem): wait dkv_counter[batch][head_kv][kv] ==
//            s.dkv_rank(problem, item.head_q), add dK/dV, completion-wait,
//            release +1; else store dK/dV.
//     }
//   }
//
// Claiming through an atomic counter (not blockIdx) is what makes the
// liveness argument hold for any number of resident CTAs: every schedule's
// waits target either earlier-claimed items (atomic, fa3, descending) or
// members of the same wave (shift, symmetric_shift), so a wave schedule is
// live iff at least s.required_coresidency(problem) CTAs are resident
// (a cooperative launch or an SM budget guarantees it). The order in which
// items are claimed never changes a rank, so the bits do not depend on the
// grid size, the SM count or the timing.
#pragma once

#include "dash_attn/host_device.hpp"
#include "dash_attn/schedule/head_tiles.hpp"

namespace dash_attn::schedule {

// Rank of a contribution that waits for nobody (the atomic schedule).
inline constexpr int kUnordered = -1;

// One claimed work item, decoded. `tiles` is the geometry of its sequence.
struct WorkItem {
  int batch = 0;
  int head_q = 0;
  int head_kv = 0;
  int index_in_head = 0;  // item position inside its (batch, head_q)
  int num_chains = 0;     // 1, or 2 for a symmetric_shift pair
  int kv[2] = {0, 0};     // KV tiles of the chains, in execution order
  HeadTiles tiles;
};

}  // namespace dash_attn::schedule
