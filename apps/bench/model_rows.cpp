#include "bench/model_rows.hpp"

#include <cmath>

#include "bench/repro.hpp"
#include "calibration.hpp"
#include "host/backward_plan.hpp"

namespace dash_attn::bench {

model::CostModel h200_backward_costs(int head_dim, bool* calibrated) {
  // Fitted to the H200 grid of commit c19cafc (docs/schedules.md, "Recalibration at
  // c19cafc"); the hdim 64/128 kernels have changed since only in how the Q stage is
  // released, which measured neutral. hdim 256 borrows hdim 128's costs.
  model::CostModel cost;
  double chain = 0;  // prologue + epilogue, fitted as one per-chain cost
  if (head_dim == 64) cost.compute = 0.00287, cost.compute_masked = 0.00551, cost.reduce = 0.00108, chain = 0.00918;
  else cost.compute = 0.00260, cost.compute_masked = 0.00402, cost.reduce = 0.00097, chain = 0.01480;
  cost.handoff = cost.compute;  // s = 1.0 c in both fits
  cost.prologue = cost.epilogue = chain / 2;
  cost.overlap_reduce = true;         // the dQ writer warps add while the next tile computes,
  cost.dq_writers = 2;                // one per dQ stage,
  // No drain between chains: since the producer runs a chain ahead, a chain
  // starts while the writers still add the previous one's last tiles (the fit
  // above predates that and reads the old boundary into its per-chain cost).
  cost.drain_between_chains = false;
  if (calibrated) *calibrated = head_dim == 64 || head_dim == 128;
  return cost;
}

std::vector<Row> model_rows(const BenchOptions& options, const BenchCase& c, int threads) {
  const ProblemShape& s = c.shape;
  Options mask;
  mask.causal = c.causal;
  const schedule::TileProblem problem = host::backward_tile_problem(s, mask);  // the kernel's tiles

  std::vector<model::CalibrationPoint> points;
  for (const ScheduleKind kind : options.schedules) points.push_back(model::CalibrationPoint{problem, kind, 1});
  bool calibrated = false;
  const model::CostModel cost = h200_backward_costs(static_cast<int>(s.head_dim), &calibrated);
  const std::vector<double> ms = model::predict(points, cost, kModelWorkers, threads);

  std::vector<Row> rows;
  for (std::size_t i = 0; i < points.size(); ++i) {
    Row r;
    r.impl = "model";
    r.pass = "bwd";
    r.schedule = std::string(to_string(points[i].schedule));
    r.deterministic = points[i].schedule != ScheduleKind::kAtomic;
    r.shape = s;
    r.mask = c.causal ? "causal" : "full";
    r.repro = repro_command(options, c, Pass::kBackward, points[i].schedule);
    if (!std::isfinite(ms[i])) {
      r.status = "deadlock with " + std::to_string(kModelWorkers) + " workers";
    } else {
      r.median_ms = r.min_ms = r.max_ms = ms[i];
      r.tflops = 2.5 * forward_flops(s, c.causal) / (ms[i] * 1e9);
      r.status = calibrated ? "modeled" : "modeled (hdim 128 costs)";
    }
    rows.push_back(r);
  }
  return rows;
}

}  // namespace dash_attn::bench
