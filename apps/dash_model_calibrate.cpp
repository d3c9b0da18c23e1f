#include "dash_model_calibrate.hpp"

#include <cstdio>
#include <fstream>
#include <iostream>
#include <map>
#include <set>
#include <sstream>
#include <stdexcept>
#include <string>
#include <vector>

#include "bench_json.hpp"
#include "calibration.hpp"
#include "dash_attn/schedule/resolve.hpp"
#include "evaluate.hpp"

namespace dm = dash_attn::model;
using dash_attn::ScheduleKind;

namespace {

std::string name(ScheduleKind kind) { return std::string(dash_attn::to_string(kind)); }

// One (mask, seqlen) of a head dim: its points, by index.
struct Config {
  bool causal;
  int seqlen;
  std::vector<int> points;
};

void report_head_dim(int head_dim, const std::vector<dm::BenchRow>& rows, int workers) {
  std::vector<dm::CalibrationPoint> points;
  std::map<std::pair<bool, int>, Config> configs;
  for (const dm::BenchRow& row : rows) {
    // auto is a second run of one of the others, resolved by the rule of the
    // measured commit (not necessarily today's resolve.hpp): not fitted.
    if (row.head_dim != head_dim || row.schedule == ScheduleKind::kAuto) continue;
    auto& config = configs.try_emplace({row.causal, row.seqlen}, Config{row.causal, row.seqlen, {}}).first->second;
    config.points.push_back(static_cast<int>(points.size()));
    points.push_back(dm::CalibrationPoint{dm::standard_problem(head_dim, row.causal, row.seqlen), row.schedule, row.median_ms});
  }
  dm::CalibrationOptions options;
  options.workers = workers;
  const dm::Calibration fit = dm::calibrate(points, options);
  const dm::CostModel& c = fit.cost;

  std::printf("## head_dim %d (%zu rows, %d workers)\n\n", head_dim, points.size(), workers);
  std::printf("fitted (ms): c %.5f, c_masked %.5f, r %.5f (%.2f c), s %.5f (%.2f c), prologue + epilogue %.5f per chain; "
              "overlapped adds; rms relative error %.1f%% (%d model runs)\n\n",
              c.compute, c.compute_masked, c.reduce, c.reduce / c.compute, c.handoff, c.handoff / c.compute,
              c.prologue + c.epilogue, 100 * fit.rms_relative_error, fit.evaluations);
  std::printf("| mask | seqlen | schedule (ms measured / modeled, error) | rank corr. | measured best | model pick (measured) |\n");
  std::printf("|---|---|---|---|---|---|\n");
  int agree = 0, total = 0;
  double corr_sum = 0;
  for (const auto& [key, config] : configs) {
    std::ostringstream cells;
    std::vector<double> measured, modeled;
    ScheduleKind best = ScheduleKind::kAtomic;
    double best_ms = 0;
    std::map<ScheduleKind, double> measured_of;
    for (int i : config.points) {
      const dm::CalibrationPoint& p = points[i];
      char cell[96];
      std::snprintf(cell, sizeof cell, "%s %.3f / %.3f (%+.0f%%); ", name(p.schedule).c_str(), p.measured,
                    fit.predicted[i], 100 * (fit.predicted[i] / p.measured - 1));
      cells << cell;
      // Rank the schedules that ran as themselves (shift on a causal mask is
      // symmetric_shift, and the reverse: the same kernel twice).
      if (dash_attn::schedule::resolve_schedule(p.schedule, p.problem) != p.schedule) continue;
      measured.push_back(p.measured);
      modeled.push_back(fit.predicted[i]);
      measured_of[p.schedule] = p.measured;
      if (p.schedule != ScheduleKind::kAtomic && (best_ms == 0 || p.measured < best_ms)) best = p.schedule, best_ms = p.measured;
    }
    const double corr = dm::spearman(measured, modeled);
    const ScheduleKind pick =
        dm::pick_schedule(points[config.points.front()].problem, workers, dm::Assignment::kDynamic, c);
    const double pick_ms = measured_of.count(pick) ? measured_of[pick] : 0;
    const bool same = pick == best;
    agree += same, ++total, corr_sum += corr;
    std::printf("| %s | %d | %s| %.2f | %s | %s (%s) |\n", config.causal ? "causal" : "full", config.seqlen,
                cells.str().c_str(), corr, name(best).c_str(), name(pick).c_str(),
                same ? "=" : pick_ms > 0 ? ("+" + std::to_string(static_cast<int>(100 * (pick_ms / best_ms - 1) + 0.5)) + "%").c_str()
                                        : "not measured");
  }
  std::printf("\nmean rank correlation %.2f; model pick = measured best in %d of %d configurations\n\n",
              corr_sum / total, agree, total);
}

}  // namespace

int run_calibration(const std::string& path) {
  std::ifstream in(path);
  if (!in) {
    std::cerr << "dash-model: --calibrate: cannot read '" << path << "'\n";
    return 2;
  }
  std::stringstream text;
  text << in.rdbuf();
  dm::BenchFile file;
  try {
    file = dm::parse_bench_json(text.str());
  } catch (const std::invalid_argument& error) {
    std::cerr << "dash-model: --calibrate: " << path << ": " << error.what()
              << " (expected a dash-bench --json file)\n";
    return 2;
  }
  std::printf("# Calibration of the cost model against %s (%s, commit %s)\n\n", path.c_str(), file.device.c_str(),
              file.commit.c_str());
  std::set<int> head_dims;
  for (const dm::BenchRow& row : file.backward) head_dims.insert(row.head_dim);
  try {
    for (int head_dim : head_dims) report_head_dim(head_dim, file.backward, file.sms);
  } catch (const std::invalid_argument& error) {
    std::cerr << "dash-model: --calibrate: " << path << ": " << error.what() << "\n";
    return 2;
  }
  return 0;
}
