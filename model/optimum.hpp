// Exact optimum of small problems (n <= 4 KV tiles, m <= 2 heads in the
// tests) by branch and bound over every schedule the contiguity constraint
// allows: any assignment of chains to workers and order among them, any
// Q-tile order inside a chain, any reduction order of every dQ tile.
//
// Method: a schedule is fixed by the order of operations on each resource;
// its earliest-start (semi-active) realization lists its operations by start
// time, and appending them in that order, each at its earliest feasible
// time, rebuilds it. So searching the operation sequences whose start times
// never decrease (ties in a fixed key order) visits an optimal schedule.
// Needs positive c and r; serial compute -> add (the paper's model); no GQA.
#pragma once

#include <cstdint>

#include "cost_model.hpp"
#include "schedule_trace.hpp"

namespace dash_attn::model {

struct OptimumResult {
  double makespan = 0;
  bool proven = false;  // false when the node limit stopped the search first
  std::int64_t nodes = 0;
};

// `trace` supplies the chains (any schedule's trace of the problem: only the
// tiles and masks are used). `upper_bound` (e.g. the best schedule found by
// simulation) prunes from the start; the result never exceeds it.
OptimumResult exact_optimum(const ScheduleTrace& trace, int workers, const CostModel& cost, double upper_bound,
                            std::int64_t node_limit = 20'000'000);

}  // namespace dash_attn::model
