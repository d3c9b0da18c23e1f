// A lower bound on the makespan of any schedule of a problem on W workers
// under the contiguity constraint (a chain stays on one worker).
#pragma once

#include "cost_model.hpp"
#include "schedule_trace.hpp"

namespace dash_attn::model {

struct LowerBound {
  double value = 0;  // max of the three below
  double load = 0;   // all work spread evenly over the workers
  double chain = 0;  // the longest chain alone
  double tile = 0;   // ordered schedules: the adds into one dQ tile, serialized, after one compute
};

// Only the tiles and masks of `trace` are used, not its orders: the bound
// holds for every deterministic schedule of the same problem (for atomic,
// whose adds the model lets overlap, without the tile term).
LowerBound lower_bound(const ScheduleTrace& trace, int workers, const CostModel& cost);

}  // namespace dash_attn::model
