// The exact optimum of small problems (n <= 4 KV tiles, m <= 2 heads, full
// and causal) is never above any schedule's makespan, never below the lower
// bound, and finds the known optima.
#include <gtest/gtest.h>

#include <algorithm>

#include "evaluate.hpp"
#include "optimum.hpp"
#include "paper_setting.hpp"

namespace dash_attn::model {
namespace {

struct Case {
  int n, m;
  bool causal;
  CostModel cost;
};

std::vector<Case> small_cases() {
  std::vector<Case> cases;
  CostModel uniform = paper_cost(1.0, 0.5);
  CostModel skewed = paper_cost(1.0, 0.7);
  skewed.compute_masked = 0.6;
  skewed.handoff = 0.3;
  skewed.prologue = 0.2;
  skewed.epilogue = 0.1;
  for (int n = 1; n <= 4; ++n)
    for (int m = 1; m <= 2; ++m)
      for (bool causal : {false, true})
        for (const CostModel& cost : {uniform, skewed}) cases.push_back(Case{n, m, causal, cost});
  return cases;
}

TEST(ModelOptimum, NeverAboveAnyScheduleNeverBelowTheBound) {
  for (const Case& c : small_cases()) {
    const schedule::TileProblem problem = paper_problem(c.n, c.m, c.causal);
    double best_schedule = 1e300;
    std::vector<double> makespans;
    for (ScheduleKind kind : {ScheduleKind::kFA3, ScheduleKind::kDescending, ScheduleKind::kShift})
      for (Assignment assignment : {Assignment::kStatic, Assignment::kDynamic}) {
        const Evaluation e = evaluate(problem, kind, c.n, assignment, c.cost);
        if (e.sim.deadlock) continue;
        makespans.push_back(e.sim.makespan);
        best_schedule = std::min(best_schedule, e.sim.makespan);
      }
    const Evaluation any = evaluate(problem, ScheduleKind::kFA3, c.n, Assignment::kStatic, c.cost);
    const std::string name = "n " + std::to_string(c.n) + " m " + std::to_string(c.m) + (c.causal ? " causal" : " full") +
                             " s " + std::to_string(c.cost.handoff);
    // Seeded with the best schedule, as dash-model --optimum runs it; proven
    // means the search space was exhausted below that makespan.
    const OptimumResult best = exact_optimum(any.trace, c.n, c.cost, best_schedule, 2'000'000);
    ASSERT_TRUE(best.proven) << name << " after " << best.nodes << " nodes";
    for (double makespan : makespans) EXPECT_LE(best.makespan, makespan + 1e-9) << name;
    EXPECT_GE(best.makespan, any.bound.value - 1e-9) << name;
    // Without the seed the search must find the same optimum by itself (the
    // small cases only: from scratch, 4 x 2 full needs minutes).
    if (c.n * c.m <= 4) {
      const OptimumResult scratch = exact_optimum(any.trace, c.n, c.cost, 1e300, 2'000'000);
      ASSERT_TRUE(scratch.proven) << name;
      EXPECT_NEAR(scratch.makespan, best.makespan, 1e-9) << name;
    }
  }
}

}  // namespace
}  // namespace dash_attn::model
