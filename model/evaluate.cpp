#include "evaluate.hpp"

namespace dash_attn::model {

Evaluation evaluate(const schedule::TileProblem& problem, ScheduleKind kind, int workers, Assignment assignment,
                    const CostModel& cost) {
  Evaluation e;
  e.requested = kind;
  e.trace = build_trace(problem, kind, assignment == Assignment::kStatic);
  e.sim = simulate(e.trace, workers, assignment, cost);
  if (!e.sim.deadlock) e.path = critical_path(e.trace, e.sim, cost);
  e.bound = lower_bound(e.trace, workers, cost);
  return e;
}

ScheduleKind pick_schedule(const schedule::TileProblem& problem, int workers, Assignment assignment,
                           const CostModel& cost) {
  ScheduleKind best = ScheduleKind::kFA3;
  double best_makespan = 0;
  for (ScheduleKind kind : {ScheduleKind::kFA3, ScheduleKind::kDescending, ScheduleKind::kShift}) {
    const Evaluation e = evaluate(problem, kind, workers, assignment, cost);
    if (e.sim.deadlock) continue;
    if (kind == ScheduleKind::kFA3 || e.sim.makespan < best_makespan) {
      best = e.trace.kind;
      best_makespan = e.sim.makespan;
    }
  }
  return best;
}

}  // namespace dash_attn::model
