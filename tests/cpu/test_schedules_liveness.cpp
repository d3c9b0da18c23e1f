// Liveness and invariance, checked by simulating real claim orders:
//  - schedules whose waits target earlier claims complete with any number of
//    resident workers from 1 up; wave schedules complete exactly when at
//    least their documented co-residency is resident, and deadlock below it;
//  - the order in which adds land in each tile, hence the bits of a float
//    sum, does not depend on the worker count or the assignment.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <random>
#include <vector>

#include "dash_attn/schedule/resolve.hpp"
#include "dash_attn/schedule/schedule.hpp"
#include "dash_attn/schedule/waves.hpp"
#include "schedule_test_problems.hpp"
#include "schedule_trace.hpp"
#include "simulate.hpp"

namespace dash_attn::testing {
namespace {

model::CostModel jittery_cost(std::mt19937& rng) {
  std::uniform_real_distribution<double> u(0.1, 1.0);
  model::CostModel cost;
  cost.compute = u(rng);
  cost.compute_masked = u(rng);
  cost.reduce = u(rng);
  cost.handoff = u(rng) - 0.1;
  cost.prologue = u(rng);
  cost.epilogue = u(rng);
  cost.reduce_dkv = u(rng);
  cost.overlap_reduce = rng() % 2 == 0;
  cost.dq_writers = 1 + static_cast<int>(rng() % 2);
  cost.drain_between_chains = rng() % 2 == 0;
  return cost;
}

TEST(ScheduleLiveness, CompletesExactlyWithTheDocumentedCoResidency) {
  std::mt19937 rng(7);
  for (const OwnedProblem& owned : random_problems(8, 120, 500)) {
    const schedule::TileProblem p = owned.get();
    for (ScheduleKind kind : kAllKinds) {
      const model::ScheduleTrace trace = model::build_trace(p, kind);
      const bool waves = trace.kind == ScheduleKind::kShift || trace.kind == ScheduleKind::kSymmetricShift;
      if (!waves) {
        EXPECT_EQ(trace.coresidency, 1);
      }
      EXPECT_LE(trace.coresidency, schedule::kMaxWaveSize);
      const model::CostModel cost = jittery_cost(rng);
      const int most = std::min<int>(trace.coresidency + 3, static_cast<int>(trace.items.size()) + 1);
      for (int workers = 1; workers <= most; ++workers) {
        const model::SimResult dynamic = model::simulate(trace, workers, model::Assignment::kDynamic, cost);
        ASSERT_EQ(dynamic.deadlock, workers < trace.coresidency)
            << owned.describe() << " " << to_string(trace.kind) << " with " << workers << " workers: " << dynamic.deadlock_reason;
        if (workers >= trace.coresidency) {
          const model::SimResult fixed = model::simulate(trace, workers, model::Assignment::kStatic, cost);
          ASSERT_FALSE(fixed.deadlock) << owned.describe() << " " << to_string(trace.kind) << " static, " << workers;
        }
      }
    }
  }
}

// Adds into each dQ tile in the order the simulation performed them.
std::vector<std::vector<std::pair<int, int>>> add_order(const model::ScheduleTrace& trace, const model::SimResult& sim) {
  struct Add {
    double start;
    int chain, step;
  };
  std::vector<std::vector<Add>> adds(trace.dq_contributors.size());
  for (const auto& timeline : sim.timelines)
    for (const model::Segment& s : timeline)
      if (s.kind == model::SegmentKind::kReduce) adds[trace.chains[s.chain].steps[s.step].dq_tile].push_back({s.start, s.chain, s.step});
  std::vector<std::vector<std::pair<int, int>>> order(adds.size());
  for (std::size_t t = 0; t < adds.size(); ++t) {
    std::stable_sort(adds[t].begin(), adds[t].end(), [](const Add& a, const Add& b) { return a.start < b.start; });
    for (const Add& a : adds[t]) order[t].emplace_back(a.chain, a.step);
  }
  return order;
}

// fp32 sums of per-contribution values in that order, as bits.
std::vector<std::uint32_t> tile_sums(const std::vector<std::vector<std::pair<int, int>>>& order) {
  std::vector<std::uint32_t> bits;
  for (const auto& tile : order) {
    float sum = 0;
    for (const auto& [chain, step] : tile) {
      std::mt19937 value(static_cast<unsigned>(chain * 7919 + step));
      sum += std::uniform_real_distribution<float>(-1e3f, 1e3f)(value);
    }
    std::uint32_t b;
    std::memcpy(&b, &sum, sizeof b);
    bits.push_back(b);
  }
  return bits;
}

TEST(ScheduleInvariance, AddOrderAndBitsIndependentOfWorkerCount) {
  std::mt19937 rng(9);
  for (const OwnedProblem& owned : random_problems(10, 60, 900)) {
    const schedule::TileProblem p = owned.get();
    for (ScheduleKind kind : kOrderedKinds) {
      const model::ScheduleTrace trace = model::build_trace(p, kind);
      const model::CostModel cost = jittery_cost(rng);
      const auto reference = add_order(trace, model::simulate(trace, trace.coresidency, model::Assignment::kDynamic, cost));
      for (int workers : {trace.coresidency + 1, trace.coresidency + 5, 132}) {
        for (model::Assignment assignment : {model::Assignment::kDynamic, model::Assignment::kStatic}) {
          const model::SimResult sim = model::simulate(trace, workers, assignment, cost);
          ASSERT_FALSE(sim.deadlock);
          const auto order = add_order(trace, sim);
          ASSERT_EQ(order, reference) << owned.describe() << " " << to_string(trace.kind) << " " << workers;
          ASSERT_EQ(tile_sums(order), tile_sums(reference));
        }
      }
      // ...and the order is the rank order.
      for (const auto& tile : reference)
        for (std::size_t r = 0; r < tile.size(); ++r)
          ASSERT_EQ(trace.chains[tile[r].first].steps[tile[r].second].rank, static_cast<int>(r));
    }
  }
}

TEST(ScheduleLaunchGrid, WholeWavesPerRoundAndNeverBelowTheCoResidency) {
  for (const OwnedProblem& owned : random_problems(9, 120, 1500)) {
    const schedule::TileProblem p = owned.get();
    for (ScheduleKind kind : kAllKinds) {
      const schedule::Schedule s(schedule::resolve_schedule(kind, p), p);
      const int need = s.required_coresidency(p);
      const int items = s.total_items(p);
      for (int cap : {need, need + 1, 2 * need + 5, 132}) {
        if (cap < need) continue;
        const int grid = s.launch_grid(p, cap);
        EXPECT_GE(grid, 1);
        EXPECT_LE(grid, std::max(1, std::min(items, cap))) << owned.describe();
        if (need > 1 && items > need) {
          EXPECT_EQ(grid % need, 0) << owned.describe() << " cap " << cap;
          EXPECT_GE(grid, need) << owned.describe() << " cap " << cap;
        }
        if (need == 1) EXPECT_EQ(grid, std::max(1, std::min(items, cap)));
      }
    }
  }
}

}  // namespace
}  // namespace dash_attn::testing
