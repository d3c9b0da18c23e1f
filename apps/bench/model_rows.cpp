#include "bench/model_rows.hpp"

#include <cmath>

#include "bench/repro.hpp"
#include "calibration.hpp"
#include "dash_attn/plan/backward_plan.hpp"

namespace dash_attn::bench {

model::CostModel h200_backward_costs(int head_dim, bool* calibrated) {
  // Fitted to the H200 grids of commit c91b5f7 (hdim 64, 128) and c51f0fc (256,
  // the same hdim 256 kernel) (docs/schedules.md, "Recalibration at c91b5f7"):
  // c, c_masked, r, s and the per-chain cost in ms.
  if (calibrated) *calibrated = head_dim == 64 || head_dim == 128 || head_dim == 256;
  if (head_dim == 64) return model::kernel_cost_model(0.00310, 0.00392, 0.00039, 0, 0.00636);
  if (head_dim == 256) return model::kernel_cost_model(0.00346, 0.00365, 0.00216, 0.00173, 0.01711);
  return model::kernel_cost_model(0.00261, 0.00345, 0.00065, 0.00261, 0.01118);
}

std::vector<Row> model_rows(const BenchOptions& options, const BenchCase& c, int threads) {
  const ProblemShape& s = c.shape;
  const schedule::TileProblem problem = host::backward_tile_problem(s, case_options(c));  // the kernel's tiles

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
    r.mask = mask_text(c);
    r.repro = repro_command(options, c, Pass::kBackward, points[i].schedule);
    if (!std::isfinite(ms[i])) {
      r.status = "deadlock with " + std::to_string(kModelWorkers) + " workers";
    } else {
      r.median_ms = r.min_ms = r.max_ms = ms[i];
      r.tflops = 2.5 * forward_flops(c) / (ms[i] * 1e9);
      r.status = calibrated ? "modeled" : "modeled (hdim 128 costs)";
    }
    rows.push_back(r);
  }
  return rows;
}

}  // namespace dash_attn::bench
