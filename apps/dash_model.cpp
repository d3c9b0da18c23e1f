// dash-model: the modeled makespan of every backward schedule for a shape, a
// worker count and a cost model, as a table, JSON or a Gantt chart (SVG).
// See docs/schedules.md for what the numbers mean.
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <iostream>
#include <optional>
#include <set>
#include <sstream>
#include <stdexcept>
#include <string>
#include <vector>

#include "dash_attn/schedule/resolve.hpp"
#include "dash_attn/tile_config.hpp"
#include "cli_values.hpp"
#include "dash_model_calibrate.hpp"
#include "evaluate.hpp"
#include "gantt_svg.hpp"
#include "optimum.hpp"
#include "paper_setting.hpp"

namespace dm = dash_attn::model;
namespace ds = dash_attn::schedule;
using dash_attn::ScheduleKind;

namespace {

constexpr const char* kUsage = R"(usage: dash-model [options]
Models the deterministic attention backward: makespan of each schedule on W
workers, the lower bound, idle time per worker, deadlocks.

problem:
  --batch B            sequences (1)
  --heads H            query heads (16)
  --heads-kv H         key/value heads, divides --heads (= --heads)
  --seqlen L           seqlen_q = seqlen_k = L (4096)
  --seqlen-q L, --seqlen-k L
  --seqlens-q L1,L2,.. --seqlens-k L1,L2,..  varlen: one length per sequence
  --head-dim D         picks the backward tiles (128 -> 64x128)
  --block-m M --block-n N   tiles, overriding --head-dim
  --causal             bottom-right aligned causal mask
machine:
  --workers W          resident workers (CTAs) (132)
  --assign dynamic|static   claim counter (the kernel) or item w + k*W (dynamic)
cost model (any unit; see docs/schedules.md):
  --c X --c-masked X --r X --s X --prologue X --epilogue X --r-dkv X
  --overlap            dQ adds overlap the next compute (FA3's writer warp)
  --dq-writers N       with --overlap: N dQ stages, one writer each (the kernel: 2)
  --drain              with --overlap: a chain starts after every writer finished
                       (the kernel's CTA barrier between chains)
schedules and output:
  --schedules a,b,..   from atomic,fa3,descending,shift,symmetric_shift,auto
  --paper N M          the paper's setting: N workers = N KV tiles = N Q tiles,
                       M heads, uniform c and r, s = 0, serial, static
  --optimum            also the exact optimum (small problems only)
  --svg FILE           Gantt chart of the schedules
  --json               one JSON object per schedule instead of the table
calibration:
  --calibrate FILE     fit c, c_masked, r, s and the per-chain cost to the
                       backward rows of a dash-bench --json file (per head
                       dim, standard grid shapes, the file's SM count) and
                       print measured vs modeled times as Markdown
)";

struct Options {
  int batch = 1, heads = 16, heads_kv = 0, seqlen_q = 4096, seqlen_k = 4096, head_dim = 128;
  int block_m = 0, block_n = 0, workers = 132;
  std::vector<int> seqlens_q, seqlens_k;
  bool causal = false, json = false, optimum = false;
  dm::Assignment assignment = dm::Assignment::kDynamic;
  dm::CostModel cost;
  std::optional<std::pair<int, int>> paper;
  std::vector<ScheduleKind> schedules;
  std::string svg;
};

[[noreturn]] void fail(const std::string& message) {
  std::cerr << "dash-model: " << message << "\n(run dash-model --help for the options)\n";
  std::exit(2);
}

int parse_int(const std::string& flag, const std::string& text, int min) {
  const std::optional<int> value = dash_attn::cli::parse_int(text, min);
  if (!value) fail(flag + " expects an integer >= " + std::to_string(min) + ", got '" + text + "'");
  return *value;
}

double parse_cost(const std::string& flag, const std::string& text) {
  std::size_t used = 0;
  double value = -1;
  try {
    value = std::stod(text, &used);
  } catch (const std::exception&) {
    used = 0;
  }
  if (used != text.size() || !(value >= 0)) fail(flag + " expects a number >= 0, got '" + text + "'");
  return value;
}

std::vector<std::string> split(const std::string& text) { return dash_attn::cli::split_commas(text); }

Options parse(int argc, char** argv) {
  Options o;
  std::set<std::string> costs_given;  // cost flags --paper does not allow
  for (int i = 1; i < argc; ++i) {
    const std::string flag = argv[i];
    auto value = [&]() -> std::string {
      if (i + 1 >= argc) fail(flag + " needs a value");
      return argv[++i];
    };
    if (flag == "--help" || flag == "-h") {
      std::cout << kUsage;
      std::exit(0);
    } else if (flag == "--batch") o.batch = parse_int(flag, value(), 1);
    else if (flag == "--heads") o.heads = parse_int(flag, value(), 1);
    else if (flag == "--heads-kv") o.heads_kv = parse_int(flag, value(), 1);
    else if (flag == "--seqlen") o.seqlen_q = o.seqlen_k = parse_int(flag, value(), 1);
    else if (flag == "--seqlen-q") o.seqlen_q = parse_int(flag, value(), 1);
    else if (flag == "--seqlen-k") o.seqlen_k = parse_int(flag, value(), 1);
    else if (flag == "--seqlens-q" || flag == "--seqlens-k") {
      auto& list = flag == "--seqlens-q" ? o.seqlens_q : o.seqlens_k;
      for (const std::string& part : split(value())) list.push_back(parse_int(flag, part, 0));
    } else if (flag == "--head-dim") {
      o.head_dim = parse_int(flag, value(), 1);
      if (!dash_attn::is_supported_head_dim(o.head_dim)) fail("--head-dim must be 64, 128 or 256");
    } else if (flag == "--block-m") o.block_m = parse_int(flag, value(), 1);
    else if (flag == "--block-n") o.block_n = parse_int(flag, value(), 1);
    else if (flag == "--causal") o.causal = true;
    else if (flag == "--workers") o.workers = parse_int(flag, value(), 1);
    else if (flag == "--assign") {
      const std::string v = value();
      if (v == "dynamic") o.assignment = dm::Assignment::kDynamic;
      else if (v == "static") o.assignment = dm::Assignment::kStatic;
      else fail("--assign expects dynamic or static, got '" + v + "'");
    } else if (flag == "--c") o.cost.compute = parse_cost(flag, value());
    else if (flag == "--c-masked") o.cost.compute_masked = parse_cost(flag, value()), costs_given.insert(flag);
    else if (flag == "--r") o.cost.reduce = parse_cost(flag, value());
    else if (flag == "--s") o.cost.handoff = parse_cost(flag, value()), costs_given.insert(flag);
    else if (flag == "--prologue") o.cost.prologue = parse_cost(flag, value()), costs_given.insert(flag);
    else if (flag == "--epilogue") o.cost.epilogue = parse_cost(flag, value()), costs_given.insert(flag);
    else if (flag == "--r-dkv") o.cost.reduce_dkv = parse_cost(flag, value());
    else if (flag == "--overlap") o.cost.overlap_reduce = true, costs_given.insert(flag);
    else if (flag == "--dq-writers") {
      o.cost.dq_writers = parse_int(flag, value(), 1), costs_given.insert(flag);
      if (o.cost.dq_writers > dm::CostModel::kMaxDqWriters)
        fail("--dq-writers expects at most " + std::to_string(dm::CostModel::kMaxDqWriters) + ", got " + std::to_string(o.cost.dq_writers));
    }
    else if (flag == "--drain") o.cost.drain_between_chains = true, costs_given.insert(flag);
    else if (flag == "--schedules") {
      for (const std::string& name : split(value())) {
        const auto kind = dash_attn::parse_schedule_kind(name);
        if (!kind) fail("unknown schedule '" + name + "' (atomic, fa3, descending, shift, symmetric_shift, auto)");
        o.schedules.push_back(*kind);
      }
    } else if (flag == "--paper") {
      const int n = parse_int(flag, value(), 1);
      const int m = parse_int(flag, value(), 1);
      o.paper = std::make_pair(n, m);
    } else if (flag == "--optimum") o.optimum = true;
    else if (flag == "--svg") o.svg = value();
    else if (flag == "--json") o.json = true;
    else fail("unknown option '" + flag + "'");
  }
  if (o.heads_kv == 0) o.heads_kv = o.heads;
  if (o.heads % o.heads_kv != 0) fail("--heads-kv must divide --heads");
  if (!o.seqlens_q.empty() || !o.seqlens_k.empty()) {
    if (o.seqlens_q.empty()) o.seqlens_q = o.seqlens_k;
    if (o.seqlens_k.empty()) o.seqlens_k = o.seqlens_q;
    if (o.seqlens_q.size() != o.seqlens_k.size()) fail("--seqlens-q and --seqlens-k need one length per sequence each");
    o.batch = static_cast<int>(o.seqlens_q.size());
  }
  if (o.paper) {
    if (!costs_given.empty())
      fail("--paper fixes the cost model (uniform c, s = 0, no prologue/epilogue, serial); only --c and --r apply");
    if (o.cost.compute <= 0) fail("--paper needs --c > 0");
  }
  if (costs_given.count("--c-masked") == 0) o.cost.compute_masked = o.cost.compute;
  if (o.schedules.empty()) {
    o.schedules = {ScheduleKind::kAtomic, ScheduleKind::kFA3, ScheduleKind::kDescending,
                   o.causal ? ScheduleKind::kSymmetricShift : ScheduleKind::kShift, ScheduleKind::kAuto};
  }
  return o;
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

std::string json_string(std::string_view s) { return "\"" + std::string(s) + "\""; }

}  // namespace

int main(int argc, char** argv) {
  if (argc >= 2 && std::string(argv[1]) == "--calibrate") {
    if (argc != 3) fail("--calibrate takes one file and no other option");
    return run_calibration(argv[2]);
  }
  Options o = parse(argc, argv);
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
    std::cout << "[\n";
    for (std::size_t i = 0; i < results.size(); ++i) {
      const dm::Evaluation& e = results[i];
      std::cout << "  {\"schedule\": " << json_string(dash_attn::to_string(e.requested))
                << ", \"runs_as\": " << json_string(dash_attn::to_string(e.trace.kind))
                << ", \"makespan\": " << (e.sim.deadlock ? "null" : fmt(e.sim.makespan))
                << ", \"lower_bound\": " << fmt(e.bound.value)
                << ", \"critical_path\": " << (e.sim.deadlock ? "null" : fmt(e.path.length))
                << ", \"critical_path_reduce\": " << fmt(e.path.reduce) << ", \"critical_path_handoff\": " << fmt(e.path.handoff)
                << ", \"deadlock\": " << (e.sim.deadlock ? "true" : "false")
                << ", \"required_coresidency\": " << e.trace.coresidency << ", \"workers\": " << o.workers
                << ", \"idle_per_worker\": [";
      for (std::size_t w = 0; w < e.sim.busy.size(); ++w)
        std::cout << (w ? ", " : "") << fmt(e.sim.makespan > 0 ? 1.0 - e.sim.busy[w] / e.sim.makespan : 0.0);
      std::cout << "]";
      if (optimum) std::cout << ", \"optimum\": " << fmt(optimum->makespan) << ", \"optimum_proven\": " << (optimum->proven ? "true" : "false");
      std::cout << "}" << (i + 1 < results.size() ? "," : "") << "\n";
    }
    std::cout << "]\n";
  } else {
    const ds::HeadTiles t = problem.head_tiles(0);
    std::printf("problem: batch %d, heads %d/%d, tiles %dx%d, %s, %d workers (%s assignment)%s\n", problem.batch,
                problem.heads_q, problem.heads_kv, problem.block_m, problem.block_n, problem.causal ? "causal" : "full",
                o.workers, o.assignment == dm::Assignment::kDynamic ? "dynamic" : "static", o.paper ? ", paper setting" : "");
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
