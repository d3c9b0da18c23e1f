// dash-model: the modeled makespan of every backward schedule for a shape, a
// worker count and a cost model, as a table, JSON or a Gantt chart (SVG).
// See docs/schedules.md for what the numbers mean.
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <iostream>
#include <optional>
#include <stdexcept>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "dash_attn/schedule/resolve.hpp"
#include "dash_attn/tile_config.hpp"
#include "dash_model_calibrate.hpp"
#include "model_options.hpp"
#include "evaluate.hpp"
#include "gantt_svg.hpp"
#include "optimum.hpp"
#include "paper_setting.hpp"

namespace dm = dash_attn::model;
namespace ds = dash_attn::schedule;
using dash_attn::ScheduleKind;

namespace {

using dash_attn::model_cli::ModelOptions;

[[noreturn]] void fail(const std::string& message) {
  std::cerr << "dash-model: " << message << "\n(run dash-model --help for the options)\n";
  std::exit(2);
}

std::vector<int> prefix_sums(const std::vector<int>& lengths) {
  std::vector<int> sums(1, 0);
  for (int l : lengths) sums.push_back(sums.back() + l);
  return sums;
}

std::string fmt(double v) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.3f", v);
  return buf;
}

double decimals3(double v) { return std::round(v * 1000) / 1000; }

}  // namespace

int main(int argc, char** argv) {
  ModelOptions o;
  try {
    o = dash_attn::model_cli::parse_model_options(std::vector<std::string>(argv + 1, argv + argc));
  } catch (const dash_attn::cli::UsageError& e) {
    fail(e.what());
  }
  if (o.help) {
    std::cout << dash_attn::model_cli::model_usage_text();
    return 0;
  }
  if (!o.calibrate.empty()) return run_calibration(o.calibrate);
  ds::TileProblem problem;
  std::vector<int> cu_q, cu_k;
  if (o.paper) {
    problem = dm::paper_problem(o.paper->first, o.paper->second, o.causal);
    o.workers = o.paper->first;
    o.assignment = dm::Assignment::kStatic;
    o.cost = dm::paper_cost(o.cost.compute, o.cost.reduce);
  } else {
    const dash_attn::TileShape tile = dash_attn::backward_tile(o.head_dim);
    problem.batch = o.batch;
    problem.heads_q = o.heads;
    problem.heads_kv = o.heads_kv;
    problem.block_m = o.block_m > 0 ? o.block_m : tile.block_m;
    problem.block_n = o.block_n > 0 ? o.block_n : tile.block_n;
    problem.causal = o.causal;
    problem.window_left = o.window_left;
    problem.window_right = o.window_right;
    problem.seqlen_q = o.seqlen_q;
    problem.seqlen_k = o.seqlen_k;
    if (!o.seqlens_q.empty()) {
      cu_q = prefix_sums(o.seqlens_q);
      cu_k = prefix_sums(o.seqlens_k);
      problem.cu_seqlens_q = cu_q.data();
      problem.cu_seqlens_k = cu_k.data();
    }
  }

  std::vector<dm::Evaluation> results;
  for (ScheduleKind kind : o.schedules) results.push_back(dm::evaluate(problem, kind, o.workers, o.assignment, o.cost));

  std::optional<dm::OptimumResult> optimum;
  if (o.optimum) {
    double upper = 1e300;
    for (const dm::Evaluation& e : results)
      if (!e.sim.deadlock && e.trace.ordered) upper = std::min(upper, e.sim.makespan);
    try {
      if (results.front().trace.chains.size() > 16) throw std::invalid_argument("more than 16 chains");
      optimum = dm::exact_optimum(results.front().trace, o.workers, o.cost, upper);
    } catch (const std::invalid_argument& error) {
      fail(std::string("--optimum is for small problems: ") + error.what());
    }
  }

  if (o.json) {
    // One object per schedule and line; numbers to 3 decimals as the table prints them.
    std::cout << "[\n";
    for (std::size_t i = 0; i < results.size(); ++i) {
      const dm::Evaluation& e = results[i];
      nlohmann::ordered_json j;
      j["schedule"] = std::string(dash_attn::to_string(e.requested));
      j["runs_as"] = std::string(dash_attn::to_string(e.trace.kind));
      j["makespan"] = e.sim.deadlock ? nlohmann::ordered_json(nullptr) : nlohmann::ordered_json(decimals3(e.sim.makespan));
      j["lower_bound"] = decimals3(e.bound.value);
      j["critical_path"] = e.sim.deadlock ? nlohmann::ordered_json(nullptr) : nlohmann::ordered_json(decimals3(e.path.length));
      j["critical_path_reduce"] = decimals3(e.path.reduce);
      j["critical_path_handoff"] = decimals3(e.path.handoff);
      j["deadlock"] = e.sim.deadlock;
      j["required_coresidency"] = e.trace.coresidency;
      j["workers"] = o.workers;
      j["idle_per_worker"] = nlohmann::ordered_json::array();
      for (const double busy : e.sim.busy)
        j["idle_per_worker"].push_back(decimals3(e.sim.makespan > 0 ? 1.0 - busy / e.sim.makespan : 0.0));
      if (optimum) j["optimum"] = decimals3(optimum->makespan), j["optimum_proven"] = optimum->proven;
      std::cout << "  " << j.dump() << (i + 1 < results.size() ? "," : "") << "\n";
    }
    std::cout << "]\n";
  } else {
    const ds::HeadTiles t = problem.head_tiles(0);
    std::printf("problem: batch %d, heads %d/%d, tiles %dx%d, %s, %d workers (%s assignment)%s\n", problem.batch,
                problem.heads_q, problem.heads_kv, problem.block_m, problem.block_n, problem.causal ? "causal" : "full",
                o.workers, o.assignment == dm::Assignment::kDynamic ? "dynamic" : "static", o.paper ? ", paper setting" : "");
    if (problem.has_window())
      std::printf("  window (%d, %d)%s: tiles outside the band skipped\n", problem.window_left,
                  problem.causal ? 0 : problem.window_right, problem.causal ? " (causal)" : "");
    if (!problem.is_varlen())
      std::printf("  seqlen_q %d, seqlen_k %d: %d Q tiles x %d KV tiles per head\n", t.seqlen_q, t.seqlen_k, t.q_tiles(),
                  t.kv_tiles());
    std::printf("cost: c %s, c_masked %s, r %s, s %s, prologue %s, epilogue %s, r_dkv %s, %s adds\n",
                fmt(o.cost.compute).c_str(), fmt(o.cost.compute_masked).c_str(), fmt(o.cost.reduce).c_str(),
                fmt(o.cost.handoff).c_str(), fmt(o.cost.prologue).c_str(), fmt(o.cost.epilogue).c_str(),
                fmt(o.cost.reduce_dkv).c_str(), o.cost.overlap_reduce ? "overlapped" : "serial");
    std::printf("%-16s %-16s %12s %12s %10s %9s %9s %6s %s\n", "schedule", "runs as", "makespan", "lower bound",
                "efficiency", "idle mean", "idle max", "needs", "deadlock");
    for (const dm::Evaluation& e : results) {
      double idle_sum = 0, idle_max = 0;
      for (double busy : e.sim.busy) {
        const double idle = e.sim.makespan > 0 ? 1.0 - busy / e.sim.makespan : 0.0;
        idle_sum += idle;
        idle_max = std::max(idle_max, idle);
      }
      std::printf("%-16s %-16s %12s %12s %10s %9s %9s %6d %s\n", std::string(dash_attn::to_string(e.requested)).c_str(),
                  std::string(dash_attn::to_string(e.trace.kind)).c_str(), e.sim.deadlock ? "-" : fmt(e.sim.makespan).c_str(),
                  fmt(e.bound.value).c_str(), e.sim.deadlock ? "-" : fmt(e.bound.value / e.sim.makespan).c_str(),
                  fmt(idle_sum / e.sim.busy.size()).c_str(), fmt(idle_max).c_str(), e.trace.coresidency,
                  e.sim.deadlock ? "yes" : "no");
      if (e.sim.deadlock) std::printf("  deadlock: %s\n", e.sim.deadlock_reason.c_str());
    }
    if (o.workers <= 16) {
      std::printf("idle fraction per worker:\n");
      for (const dm::Evaluation& e : results) {
        std::printf("  %-16s", std::string(dash_attn::to_string(e.requested)).c_str());
        for (double busy : e.sim.busy) std::printf(" %s", fmt(e.sim.makespan > 0 ? 1.0 - busy / e.sim.makespan : 0.0).c_str());
        std::printf("\n");
      }
    }
    if (o.paper) {
      const double n = o.paper->first, m = o.paper->second, cr = o.cost.compute + o.cost.reduce;
      if (o.causal) std::printf("paper's causal claim m(n+1)(c+r)/2 = %s\n", fmt(m * (n + 1) * cr / 2).c_str());
      else std::printf("paper's full-mask optimum m*n*(c+r) = %s\n", fmt(m * n * cr).c_str());
    }
    if (optimum)
      std::printf("exact optimum: %s (%s, %lld nodes)\n", fmt(optimum->makespan).c_str(),
                  optimum->proven ? "proven" : "node limit hit: an upper bound", static_cast<long long>(optimum->nodes));
  }

  if (!o.svg.empty()) {
    std::vector<dm::GanttPanel> panels;
    for (const dm::Evaluation& e : results) {
      if (e.sim.deadlock) continue;
      std::string title = std::string(dash_attn::to_string(e.requested));
      if (e.trace.kind != e.requested) title += " (runs as " + std::string(dash_attn::to_string(e.trace.kind)) + ")";
      panels.push_back(dm::GanttPanel{title + ": makespan " + fmt(e.sim.makespan), &e.trace, &e.sim});
    }
    std::ofstream out(o.svg);
    if (!out) fail("cannot write '" + o.svg + "'");
    out << dm::gantt_svg(panels);
  }
  return 0;
}
