// Critical path of the task DAG a simulated schedule ran: chain steps,
// worker order (from the simulation's assignment), and the reduction-order
// edges (weight s when they cross workers). Computed by a longest-path pass
// independent of the event simulation, so the two check each other; a cycle
// means the schedule deadlocks with that assignment.
#pragma once

#include <vector>

#include "cost_model.hpp"
#include "schedule_trace.hpp"
#include "simulate.hpp"

namespace dash_attn::model {

struct CriticalPath {
  bool cyclic = false;
  double length = 0;
  // What the path is made of (they add up to length).
  double compute = 0;  // prologue, compute, epilogue, dK/dV add
  double reduce = 0;   // dQ adds
  double handoff = 0;  // reduction-order edges that cross workers
  int cross_worker_edges = 0;
  int nodes = 0;
};

// `sim` must not be deadlocked (every item claimed).
CriticalPath critical_path(const ScheduleTrace& trace, const SimResult& sim, const CostModel& cost);

}  // namespace dash_attn::model
