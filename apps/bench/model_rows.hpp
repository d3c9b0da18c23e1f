// Without an sm_90 GPU dash-bench runs the schedule model instead: the
// modeled time of each backward schedule on each case (the DAG model of
// docs/schedules.md, the same schedule code the kernel runs), with the costs
// fitted to the H200 and its 132 SMs as workers.
#pragma once

#include <vector>

#include "bench/cases.hpp"
#include "bench/report.hpp"
#include "cost_model.hpp"

namespace dash_attn::bench {

inline constexpr int kModelWorkers = 132;  // H200 SMs: one backward CTA per SM

// docs/schedules.md, "Recalibration at c91b5f7", in ms, for head_dim 64, 128
// and 256; other head dims take hdim 128's costs and calibrated says so.
model::CostModel h200_backward_costs(int head_dim, bool* calibrated = nullptr);

// One row per backward schedule of options.schedules: impl "model", status
// "modeled" (or why not), median = min = max = the modeled makespan.
std::vector<Row> model_rows(const BenchOptions& options, const BenchCase& c, int threads);

}  // namespace dash_attn::bench
