// The model against the paper's formulas, where they hold and where they do
// not, and the simulation against the independent critical-path pass.
#include <gtest/gtest.h>

#include <random>

#include "evaluate.hpp"
#include "optimum.hpp"
#include "paper_setting.hpp"
#include "schedule_test_problems.hpp"

namespace dash_attn::model {
namespace {

Evaluation paper(int n, int m, bool causal, ScheduleKind kind, double c, double r) {
  return evaluate(paper_problem(n, m, causal), kind, n, Assignment::kStatic, paper_cost(c, r));
}

TEST(ModelPaper, FullShiftIsMNTimesCPlusR) {
  for (auto [c, r] : {std::pair{1.0, 0.5}, std::pair{1.0, 1.0}, std::pair{3.0, 0.25}}) {
    const Evaluation e = paper(8, 2, false, ScheduleKind::kShift, c, r);
    EXPECT_DOUBLE_EQ(e.sim.makespan, 2 * 8 * (c + r));
    EXPECT_DOUBLE_EQ(e.bound.value, e.sim.makespan) << "and that is optimal";
  }
}

// FA3's full-mask order: worker i waits i*r before its first add, and the lag persists.
TEST(ModelPaper, FullFa3LagsByNMinusOneAdds) {
  const Evaluation e = paper(8, 2, false, ScheduleKind::kFA3, 1.0, 0.5);
  EXPECT_DOUBLE_EQ(e.sim.makespan, 2 * 8 * 1.5 + 7 * 0.5);
}

TEST(ModelPaper, CausalClaimIsNotAchievableForTwoTilesOneHead) {
  const double c = 1.0, r = 0.5;
  const Evaluation e = paper(2, 1, true, ScheduleKind::kFA3, c, r);
  const OptimumResult best = exact_optimum(e.trace, 2, paper_cost(c, r), 1e9);
  ASSERT_TRUE(best.proven);
  EXPECT_DOUBLE_EQ(best.makespan, 2 * (c + r));
  EXPECT_GT(best.makespan, 1 * (2 + 1) * (c + r) / 2) << "the paper's m(n+1)(c+r)/2";
}

// With an even number of heads, symmetric shift does reach the paper's
// formula: two heads' pairs fill the n workers, each pair n + 1 steps.
TEST(ModelPaper, CausalSymmetricShiftReachesTheFormulaForEvenHeads) {
  for (int n : {2, 4, 8, 16})
    for (int m : {2, 4}) {
      const Evaluation e = paper(n, m, true, ScheduleKind::kSymmetricShift, 1.0, 0.5);
      EXPECT_DOUBLE_EQ(e.sim.makespan, m * (n + 1) * 1.5 / 2) << n << " " << m;
    }
}

TEST(ModelCriticalPath, EqualsTheSimulatedMakespan) {
  std::mt19937 rng(11);
  std::uniform_real_distribution<double> u(0.1, 1.0);
  for (const testing::OwnedProblem& owned : testing::random_problems(12, 60, 600)) {
    for (ScheduleKind kind : testing::kAllKinds) {
      CostModel cost;
      cost.compute = u(rng), cost.compute_masked = u(rng), cost.reduce = u(rng), cost.handoff = u(rng);
      cost.prologue = u(rng), cost.epilogue = u(rng), cost.reduce_dkv = u(rng);
      cost.overlap_reduce = rng() % 2 == 0;
      cost.dq_writers = 1 + static_cast<int>(rng() % 3);
      cost.drain_between_chains = rng() % 2 == 0;
      const Evaluation e = evaluate(owned.get(), kind, 7 + static_cast<int>(rng() % 60), Assignment::kDynamic, cost);
      if (e.sim.deadlock) continue;
      ASSERT_FALSE(e.path.cyclic);
      EXPECT_NEAR(e.path.length, e.sim.makespan, 1e-9) << owned.describe() << " " << to_string(kind);
      EXPECT_NEAR(e.path.compute + e.path.reduce + e.path.handoff, e.path.length, 1e-9);
      EXPECT_LE(e.bound.value, e.sim.makespan + 1e-9) << owned.describe() << " " << to_string(kind);
    }
  }
}

}  // namespace
}  // namespace dash_attn::model
