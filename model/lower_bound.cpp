#include "lower_bound.hpp"

#include <algorithm>
#include <limits>

namespace dash_attn::model {

LowerBound lower_bound(const ScheduleTrace& trace, int workers, const CostModel& cost) {
  const bool serial = !cost.overlap_reduce;
  const double dkv = trace.reduces_dkv ? cost.reduce_dkv : 0.0;
  LowerBound bound;
  double work = 0;
  std::vector<double> cheapest_compute(trace.dq_contributors.size(), std::numeric_limits<double>::infinity());
  for (const TraceChain& chain : trace.chains) {
    double compute = cost.prologue + cost.epilogue + dkv;
    for (const TraceStep& step : chain.steps) {
      const double c = step.masked ? cost.compute_masked : cost.compute;
      compute += c;
      cheapest_compute[step.dq_tile] = std::min(cheapest_compute[step.dq_tile], cost.prologue + c);
    }
    const double adds = cost.reduce * static_cast<double>(chain.steps.size());
    // Overlapped: the adds run beside the computes, but the last add follows
    // the last compute and the worker is held until it completes.
    const double alone = serial ? compute + adds : compute + (chain.steps.empty() ? 0.0 : std::max(0.0, cost.reduce - cost.epilogue - dkv));
    bound.chain = std::max(bound.chain, alone);
    work += serial ? compute + adds : compute;
  }
  bound.load = work / workers;
  // Ordered adds into one tile serialize; atomic ones may overlap in the model.
  for (std::size_t t = 0; t < trace.dq_contributors.size() && trace.ordered; ++t)
    if (trace.dq_contributors[t] > 0)
      bound.tile = std::max(bound.tile, cheapest_compute[t] + cost.reduce * trace.dq_contributors[t]);
  bound.value = std::max({bound.load, bound.chain, bound.tile});
  return bound;
}

}  // namespace dash_attn::model
