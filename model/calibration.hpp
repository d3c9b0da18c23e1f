// Fits the cost model to measured backward times (dash-bench rows) by
// simulating every measured (problem, schedule) with the same code as
// dash-model, and predicts times from a fitted model. Units: the measured
// ones (ms), so fitted costs are ms per step, per add, per chain.
//
// The fit, deterministic and in three stages (docs/schedules.md, Calibration):
//  1. atomic rows: c, c_masked and the per-chain cost p (prologue = epilogue
//     = p / 2) by Gauss-Newton least squares on relative errors; the model is
//     piecewise linear in the costs, so the finite-difference Jacobian is the
//     step/chain counts on the critical path and a few iterations converge.
//     r = 0.5c meanwhile: an atomic add overlaps the next step (only the last
//     add of a worker shows), so the atomic rows barely see r.
//  2. all rows: a grid over r/c and s/c, refined around the best point; each
//     point is scored after the common scale of all costs that fits it best.
//  3. the best point's costs times that scale.
// The kernel's structure (overlapped adds, no drain between chains) is
// kernel_cost_model's.
#pragma once

#include <vector>

#include "cost_model.hpp"
#include "dash_attn/schedule/tile_problem.hpp"
#include "dash_attn/types.hpp"

namespace dash_attn::model {

// dash-bench --grid standard: 16k tokens (batch = 16384 / seqlen) and hidden
// 2048 (heads = 2048 / head_dim), MHA, tiles of backward_tile(head_dim).
schedule::TileProblem standard_problem(int head_dim, bool causal, int seqlen);

struct CalibrationPoint {
  schedule::TileProblem problem;  // non-varlen
  ScheduleKind schedule = ScheduleKind::kAtomic;  // as requested; resolved like the kernel does
  double measured = 0;                            // > 0
};

struct CalibrationOptions {
  int workers = 132;
  int threads = 2;                                        // simulations run in parallel
  std::vector<double> reduce_ratios{0.25, 0.5, 0.75, 1.0};  // r / c, stage 2 grid
  std::vector<double> handoff_ratios{0.0, 0.5, 1.0, 2.0};   // s / c
  int refinements = 1;  // each halves the grid step around the best point (3 x 3)
};

struct Calibration {
  CostModel cost;
  std::vector<double> predicted;  // per point, in the measured unit
  double rms_relative_error = 0;
  int evaluations = 0;  // simulations of the whole point set
};

// The kernel as the model runs it, around fitted costs (per step, per masked
// step, per add, per hand-off, per chain): the dQ writer warps, one per dQ
// stage, add while the next Q tile computes, and a chain starts while they
// still add the previous one's last tiles. The fit and dash-bench --model
// both build their cost models here.
CostModel kernel_cost_model(double compute, double compute_masked, double reduce, double handoff, double chain);

// Throws std::invalid_argument without atomic points or with a non-positive measurement.
Calibration calibrate(const std::vector<CalibrationPoint>& points, const CalibrationOptions& options);

// Modeled makespan of every point (dynamic claims, as the kernel claims);
// a deadlocked schedule predicts +infinity.
std::vector<double> predict(const std::vector<CalibrationPoint>& points, const CostModel& cost, int workers,
                            int threads);

// Spearman's rank correlation (ties take their mean rank); 0 when either side is constant.
double spearman(const std::vector<double>& a, const std::vector<double>& b);

}  // namespace dash_attn::model
