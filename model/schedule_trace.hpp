// Everything a schedule decides for one problem, enumerated on the host by
// the same schedule objects the kernel runs: the work items in claim order,
// each chain's Q tiles with their ranks, and the GQA dK/dV ranks. The model,
// the CLI and the tests all read schedules through this trace.
#pragma once

#include <vector>

#include "dash_attn/schedule/tile_problem.hpp"
#include "dash_attn/types.hpp"

namespace dash_attn::model {

struct TraceStep {
  int head_q = 0;   // the q-head this step belongs to (a chain may walk several)
  int q = 0;        // Q tile inside the head
  int dq_tile = 0;  // global dQ tile id (counter index)
  int rank = 0;     // schedule::kUnordered for atomic
  bool masked = false;
};

struct TraceChain {
  int batch = 0, head_q = 0, head_kv = 0, kv = 0;
  int dkv_tile = 0;  // global (batch, head_kv, kv) id
  int dkv_rank = 0;  // position among the chains of the GQA group (reduces_dkv)
  std::vector<TraceStep> steps;
};

struct TraceItem {
  int first_chain = 0;  // chains [first_chain, first_chain + num_chains) of ScheduleTrace::chains
  int num_chains = 0;
};

struct ScheduleTrace {
  ScheduleKind kind = ScheduleKind::kAtomic;  // resolved
  bool ordered = false;
  int group_size = 1;        // q-heads per KV head
  int chain_heads = 1;       // q-heads a chain walks (Schedule::chain_heads)
  bool reduces_dkv = false;  // chains add dK/dV into the KV head's accumulator (ordered when `ordered`)
  int coresidency = 1;       // resident workers the schedule needs to be live
  std::vector<TraceItem> items;   // claim order
  std::vector<TraceChain> chains;
  std::vector<int> dq_contributors;  // per dQ tile
  int num_dkv_tiles = 0;
};

// `requested` goes through schedule::resolve_schedule first. Items come in the
// kernel's claim order, or with `head_major` one head after the other (the
// paper's order, which its static "chain i on worker i" assumes). Chains walk
// `chain_heads` q-heads (a divisor of the group size; 0: the kernel's rule,
// schedule::default_chain_heads).
ScheduleTrace build_trace(const schedule::TileProblem& problem, ScheduleKind requested, bool head_major = false,
                          int chain_heads = 0);

}  // namespace dash_attn::model
