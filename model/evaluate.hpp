// One schedule on one problem, end to end: trace, simulation, critical path
// and lower bound; and the model's own pick among the deterministic schedules.
#pragma once

#include "cost_model.hpp"
#include "critical_path.hpp"
#include "lower_bound.hpp"
#include "schedule_trace.hpp"
#include "simulate.hpp"

namespace dash_attn::model {

struct Evaluation {
  ScheduleKind requested = ScheduleKind::kAuto;
  ScheduleTrace trace;  // trace.kind is what ran
  SimResult sim;
  CriticalPath path;    // empty when the simulation deadlocked
  LowerBound bound;
};

Evaluation evaluate(const schedule::TileProblem& problem, ScheduleKind kind, int workers, Assignment assignment,
                    const CostModel& cost);

// The deterministic schedule with the smallest modeled makespan among those
// live with `workers` resident workers (ties: the earlier of fa3,
// descending, shift/symmetric_shift).
ScheduleKind pick_schedule(const schedule::TileProblem& problem, int workers, Assignment assignment,
                           const CostModel& cost);

}  // namespace dash_attn::model
