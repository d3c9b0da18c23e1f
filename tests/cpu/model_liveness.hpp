// The liveness check the schedule tests share: a trace simulated on 1..24
// workers (dynamic and static claims) under random costs drawn from rng
// never deadlocks and runs every item.
#pragma once

#include <gtest/gtest.h>

#include <algorithm>
#include <random>
#include <string>

#include "schedule_trace.hpp"
#include "simulate.hpp"

namespace dash_attn::testing {

inline void expect_live(const model::ScheduleTrace& trace, std::mt19937& rng, const std::string& what) {
  std::uniform_real_distribution<double> u(0.1, 1.0);
  model::CostModel cost;
  cost.compute = u(rng), cost.compute_masked = u(rng), cost.reduce = u(rng), cost.handoff = u(rng);
  cost.prologue = u(rng), cost.reduce_dkv = u(rng);
  cost.overlap_reduce = rng() % 2 == 0;
  const int most = std::min<int>(24, static_cast<int>(trace.items.size()) + 1);
  for (int workers = 1; workers <= most; ++workers)
    for (model::Assignment a : {model::Assignment::kDynamic, model::Assignment::kStatic}) {
      const model::SimResult r = model::simulate(trace, workers, a, cost);
      ASSERT_FALSE(r.deadlock) << what << ", " << workers << " workers: " << r.deadlock_reason;
      for (int w : r.item_worker) ASSERT_GE(w, 0) << what;
    }
}

}  // namespace dash_attn::testing
